# `make chaos`: the chaos suite (bench/chaos/) on the local control plane:
# operator kills, kube-apiserver restarts, SIGSTOP with an etcd compaction,
# leader failover, hostile jobs, a node drained and another tainted under
# running jobs, and (bench/chaos/scenarios/kueue.py, on a second cluster
# with Kueue) the operator and Kueue's manager killed while Kueue admits and
# preempts queued jobs. A benchmark of resilience, not part of `make test`; it
# prints the table and writes bench/results/chaos.{md,json}, and fails if a
# figure that must be zero is not. CHAOS_ARGS passes options, e.g. `make
# chaos CHAOS_ARGS=--short` (a few minutes), or one scenario: `make chaos
# CHAOS_ARGS="--only kueue --out /tmp/chaos"` (the names: operator_kill,
# apiserver_restart, sigstop_compact, leader_kill, hostile, drain_taint, kueue).
CHAOS_ARGS ?=

.PHONY: chaos
chaos: tools ## the chaos suite: kills, API server restarts, leader failover, hostile jobs, drained nodes, Kueue killed (bench/results/chaos.md)
	$(PYTHON) -m bench.chaos $(CHAOS_ARGS)
