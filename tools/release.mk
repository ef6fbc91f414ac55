# A release, included by the top-level Makefile (after charts/dlk8s.mk, whose
# CHART_DIR and CHART_DOC it uses): `make release` writes dist/ and pushes
# nothing; `make publish` pushes that dist/. What goes where:
# dev/dlk8s_dev/release.py.

# The version in VERSION, which the chart, the Python package and the image
# tags follow. `VERSION=0.2.0-rc.1` publishes a pre-release of the version in
# VERSION; release.py refuses any other version.
VERSION ?= $(shell cat VERSION)
DIST := dist

ifneq ($(filter publish,$(MAKECMDGOALS)),)
ifeq ($(strip $(REGISTRY)),)
$(error usage: make publish REGISTRY=host[:port][/path] [VERSION=x.y.z], e.g. REGISTRY=ghcr.io)
endif
endif

# The build context comes from the commit checked out (git archive), not from
# whatever the work tree holds; the images are built (or taken from the
# per-user cache) by dev/dlk8s_dev/images/, which needs root (buildah).
.PHONY: release
release: tools ## dist/: the packaged chart, the operator and runtime images (OCI archives), the operator's build context; pushes nothing
	$(CHART_DOC) check
	rm -rf $(DIST) && mkdir -p $(DIST)
	$(TOOLS_BIN)/helm package $(CHART_DIR) --destination $(DIST) \
	  --version $(VERSION) --app-version $(VERSION)
	git archive --format=tar.gz --prefix=dlk8s-operator-$(VERSION)/ \
	  -o $(DIST)/dlk8s-operator-$(VERSION)-context.tar.gz HEAD \
	  hooks pyproject.toml README.md LICENSE VERSION
	$(PYTHON) -m dlk8s_dev.release dist --dist $(DIST) --version $(VERSION)

# Login: REGISTRY_USER and REGISTRY_PASSWORD in the environment, or the
# user's own `helm registry login` and `skopeo login`.
.PHONY: publish
publish: release ## push dist/ to REGISTRY=host[:port][/path]: the images, and the chart (pinned to the operator's digest) as oci://REGISTRY/dlk8s/charts/dlk8s
	$(PYTHON) -m dlk8s_dev.release publish --dist $(DIST) --version $(VERSION) \
	  --registry $(REGISTRY) --helm $(TOOLS_BIN)/helm
