# Chart checks, included by the top-level Makefile, which defines TOOLS_BIN
# (.tools/bin) and VENV_BIN (.tools/venv/bin). Defaults let this file run on
# its own too: make -f charts/dlk8s.mk chart-lint
TOOLS_BIN ?= $(abspath .tools/bin)
VENV_BIN ?= $(abspath .tools/venv/bin)

CHART_DIR := charts/dlk8s
CHART_CT_CONFIG := tools/ct/ct.yaml
CHART_YAMLLINT_CONF := tools/ct/lintconf.yaml
# Every values file a user or CI passes; helm lint checks each against the schema.
CHART_LINT_VALUES := $(wildcard values/*.yaml) $(wildcard $(CHART_DIR)/ci/*-values.yaml)
# Writes (generate) or checks (check) what the chart repeats from a source kept
# elsewhere: templates/crds.yaml from crds/, and the descriptions in
# values.schema.json and the values table of docs/chart.md from the `# --`
# comments in values.yaml.
CHART_DOC := $(VENV_BIN)/python tools/chartdoc.py

.PHONY: chart-generate
chart-generate: ## rewrite the chart's CRD template (from crds/), schema descriptions and docs values table (from values.yaml)
	$(CHART_DOC) generate

.PHONY: chart-unittest
chart-unittest: ## helm-unittest suites in charts/dlk8s/tests
	$(TOOLS_BIN)/helm-unittest $(CHART_DIR)

.PHONY: chart-lint
chart-lint: ## generated chart files up to date, helm lint (helm 4 and 3, every values file), ct lint, yamllint, schema check
	$(CHART_DOC) check
	@set -e; for helm in helm4 helm3; do \
	  echo "== $$helm lint --strict $(CHART_DIR)"; \
	  $(TOOLS_BIN)/$$helm lint --strict $(CHART_DIR); \
	  for values in $(CHART_LINT_VALUES); do \
	    echo "== $$helm lint --strict $(CHART_DIR) -f $$values"; \
	    $(TOOLS_BIN)/$$helm lint --strict --quiet $(CHART_DIR) -f $$values; \
	  done; \
	done
	PATH="$(TOOLS_BIN):$(VENV_BIN):$$PATH" $(TOOLS_BIN)/ct lint --config $(CHART_CT_CONFIG)
	$(VENV_BIN)/yamllint --strict -c $(CHART_YAMLLINT_CONF) crds/ values/ examples/ \
	  $(CHART_DIR)/Chart.yaml $(CHART_DIR)/values.yaml $(CHART_DIR)/ci/ $(CHART_DIR)/tests/
	$(VENV_BIN)/python tools/ct/check_values_schema.py $(CHART_DIR)/values.schema.json

# A release: the packaged chart and the operator image's build context, both
# of the version in VERSION (which the chart, the Python package and the image
# tag follow), taken from the commit checked out (git archive), not from
# whatever the work tree holds.
RELEASE_VERSION = $(shell cat VERSION)
DIST := dist

.PHONY: release
release: ## dist/: the packaged chart and the image build context, one version (VERSION)
	$(CHART_DOC) check
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(TOOLS_BIN)/helm package $(CHART_DIR) --destination $(DIST)
	git archive --format=tar.gz --prefix=dlk8s-operator-$(RELEASE_VERSION)/ \
	  -o $(DIST)/dlk8s-operator-$(RELEASE_VERSION)-context.tar.gz HEAD \
	  hooks pyproject.toml README.md LICENSE VERSION
	@echo "Build and push the image from the context, then install the chart with it:"
	@echo "  tar -xzf $(DIST)/dlk8s-operator-$(RELEASE_VERSION)-context.tar.gz"
	@echo "  docker build -f dlk8s-operator-$(RELEASE_VERSION)/hooks/Dockerfile \\"
	@echo "    -t <your registry>/dlk8s/operator:$(RELEASE_VERSION) dlk8s-operator-$(RELEASE_VERSION)"
	@echo "  helm install dlk8s $(DIST)/dlk8s-$(RELEASE_VERSION).tgz --set image.registry=<your registry>"
