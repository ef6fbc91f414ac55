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
# elsewhere: templates/crds.yaml from crds/, and the whole values.schema.json
# and the values table of docs/chart.md from values.yaml (its defaults, `# --`
# comments and `# @schema` annotations). check also fails on a value of
# values.yaml that no template reads (tools/chart_usage.py).
CHART_DOC := $(VENV_BIN)/python tools/chartdoc.py

.PHONY: chart-generate
chart-generate: ## rewrite the chart's CRD template (from crds/), values schema and docs values table (from values.yaml)
	$(CHART_DOC) generate

.PHONY: chart-unittest
chart-unittest: ## helm-unittest suites in charts/dlk8s/tests
	$(TOOLS_BIN)/helm-unittest $(CHART_DIR)

.PHONY: chart-lint
chart-lint: ## generated chart files up to date, every value read by a template, helm lint (helm 4 and 3, every values file), ct lint, yamllint, schema check
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
	$(VENV_BIN)/yamllint --strict -c $(CHART_YAMLLINT_CONF) crds/ values/ examples/ tests/data/kwok/ \
	  $(CHART_DIR)/Chart.yaml $(CHART_DIR)/values.yaml $(CHART_DIR)/ci/ $(CHART_DIR)/tests/
	$(VENV_BIN)/python tools/ct/check_values_schema.py $(CHART_DIR)/values.schema.json
