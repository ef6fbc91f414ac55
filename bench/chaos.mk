# `make chaos`: the chaos suite (bench/chaos.py) on the local control plane:
# operator kills, kube-apiserver restarts, SIGSTOP with an etcd compaction,
# leader failover, hostile jobs, a node drained and another tainted under
# running jobs. A benchmark of resilience, not part of `make test`; it
# prints the table and writes bench/results/chaos.{md,json}, and fails if a
# figure that must be zero is not. CHAOS_ARGS passes options, e.g. `make
# chaos CHAOS_ARGS=--short` (a few minutes), or one scenario: `make chaos
# CHAOS_ARGS="--only drain_taint --out /tmp/chaos"`.
CHAOS_ARGS ?=

.PHONY: chaos
chaos: tools ## the chaos suite: kills, API server restarts, leader failover, hostile jobs, drained nodes (bench/results/chaos.md)
	$(PYTHON) bench/chaos.py $(CHAOS_ARGS)
