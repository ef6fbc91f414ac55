# dlk8s: `make demo` runs the main job on a local cluster with a real node;
# `make test` runs everything CI checks. Both install what they need first.
SHELL := /bin/bash
.DEFAULT_GOAL := help

ROOT      := $(abspath .)
TOOLS_BIN := $(ROOT)/.tools/bin
VENV      := $(ROOT)/.tools/venv
VENV_BIN  := $(VENV)/bin
PYTHON    := $(VENV_BIN)/python
PYTEST    := $(VENV_BIN)/pytest
export PATH := $(TOOLS_BIN):$(VENV_BIN):$(PATH)

include tools/versions.env
include charts/dlk8s.mk
include tools/release.mk
include bench/bench.mk
include bench/elastic.mk
include bench/chaos.mk

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-20s %s\n", $$1, $$2}'

.PHONY: tools
tools: $(VENV)/.installed ## install the pinned tool chain into .tools/ (cached per user)
	tools/install.sh

# Re-installs only when the package metadata or the pins change.
$(VENV)/.installed: pyproject.toml VERSION dev/pyproject.toml tools/constraints.txt tools/versions.env
	test -x $(PYTHON) || python3 -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[test,lint,bench]' -e dev -c tools/constraints.txt \
	    yamllint==$(YAMLLINT_VERSION) yamale==$(YAMALE_VERSION)
	touch $@

# The workflows in .github/ (and the local actions they use). shellcheck and
# pyflakes stay off: they are not pinned, so their verdict would depend on
# the machine (tests/unit/project/test_workflow.py runs the same line).
ACTIONLINT := $(TOOLS_BIN)/actionlint -shellcheck= -pyflakes=

.PHONY: lint
lint: tools chart-lint ## ruff, mypy, helm lint (3 and 4), ct lint, yamllint, actionlint
	$(VENV_BIN)/ruff check hooks dev tests bench examples tools
	$(VENV_BIN)/ruff format --check hooks dev tests bench examples tools
	$(VENV_BIN)/mypy
	$(ACTIONLINT)

.PHONY: unit
unit: tools ## unit tests (no cluster)
	$(PYTEST) tests/unit

# The images first, so that no test's time limit covers a first build. They
# need root (mmdebstrap, buildah, a real node); without it the real-node
# tests skip, which CI (root) counts as failures.
E2E_IMAGES := $(if $(filter 0,$(shell id -u)),images,)

# The images need the venv and the real node's Debian packages, not the Go
# tool chain: on a cold machine they download and unpack (network and disk)
# while Go compiles (CPU), instead of after it. A warm run finds both cached.
.PHONY: prepare
prepare: $(VENV)/.installed
	$(MAKE) --no-print-directory -j2 tools $(E2E_IMAGES)

.PHONY: node-debs
node-debs: ## the real node's Debian packages (containerd, runc, buildah, ...), as root
	tools/install.sh node-debs

# Four processes, one per folder of tests/e2e (each folder runs whole in one
# process, by the scheduler tests/conftest.py gives xdist for --dist
# loadgroup; why the folders hold what they do is said there), the unit tests
# wherever there is room. The suite is bound by the machine's CPU: on one
# 2-core machine, warm, -n 2 took 1,583 s (one process ran two groups one
# after the other), -n 3 1,110 to 1,212 s, -n 4 1,164 to 1,338 s, -n 5
# 1,243 s with 12 % more CPU (more clusters alive at once); -n 4 with the
# folders balanced on their JUnit times, 693 and 742 s. Its tests judge
# what they mean, not the wall clock, so that the load does not fail them.
PYTEST_GROUPS := -n 4 --dist loadgroup

.PHONY: e2e
e2e: prepare ## end-to-end tests on the local control plane
	$(PYTEST) $(PYTEST_GROUPS) tests/e2e

.PHONY: test
test: prepare lint chart-unittest ## everything CI checks
	$(PYTEST) $(PYTEST_GROUPS) tests

# DEMO_ARGS=--kwok: kwok's nodes only, where a real node cannot run.
# Not echoed: the first line of each is how to stop it (dev/dlk8s_dev/stopping.py).
.PHONY: demo
demo: tools ## local cluster with a real node + chart (operator in the cluster) + a TFJob that trains
	@$(PYTHON) -m dlk8s_dev.demo $(DEMO_ARGS)

.PHONY: cluster
# KUEUE=1: Kueue's manager runs beside it (dev/dlk8s_dev/kueue.py).
# MULTIKUEUE=1: instead, a MultiKueue manager and two workers, each with
# Kueue and dlk8s (dev/dlk8s_dev/multicluster.py, docs/multicluster.md).
cluster: tools ## the local cluster (a real node beside the kwok nodes; KUEUE=1: and Kueue; MULTIKUEUE=1: a MultiKueue manager and two workers), until Ctrl-C
	@$(PYTHON) -m dlk8s_dev.clustercli $(if $(filter 1,$(MULTIKUEUE)),--multikueue,--real-node $(if $(filter 1,$(KUEUE)),--kueue))

.PHONY: image
image: $(VENV)/.installed node-debs ## the operator image from hooks/Dockerfile (cached per user); prints how to push it
	$(PYTHON) -m dlk8s_dev.images operator --push-hint

.PHONY: images
images: $(VENV)/.installed node-debs ## every local image (pause, base, operator, runtime, pytorch, paddle) and the real node's image store, cached per user
	$(PYTHON) -m dlk8s_dev.images --store

.PHONY: clean
clean: ## remove .tools/ (the per-user build cache stays)
	rm -rf .tools
