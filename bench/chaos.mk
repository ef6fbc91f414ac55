# `make chaos`: the chaos suite (bench/chaos/) on the local control plane:
# operator kills, kube-apiserver restarts, SIGSTOP with an etcd compaction,
# leader failover, hostile jobs, a node drained and another tainted under
# running jobs, a node lost with its pods, a leader paused past its lease,
# the operator's clock ahead of the API server's, the operator and a node
# cut off, slow webhooks under throttling, jobs that cannot start, the
# operator stopped while pods fail and are deleted, (on a second cluster
# with Kueue) the operator and Kueue's manager killed while Kueue admits and
# preempts queued jobs, and (on three clusters) a MultiKueue worker lost.
# A benchmark of resilience, not part of `make test`; it
# prints the table and writes bench/results/chaos.{md,json}, and fails if a
# figure that must be zero is not. CHAOS_ARGS passes options, e.g. `make
# chaos CHAOS_ARGS=--short` (a few minutes), or one scenario: `make chaos
# CHAOS_ARGS="--only kueue --out /tmp/chaos"` (the names: operator_kill,
# apiserver_restart, sigstop_compact, leader_kill, hostile, drain_taint,
# lost_node, paused_leader, clock_skew, operator_partition, node_partition,
# slow_api, start_failure, operator_away, kueue, multikueue).
CHAOS_ARGS ?=

.PHONY: chaos
chaos: tools ## the chaos suite: kills, API server restarts, leader failover and pause, hostile jobs, drained, lost and cut-off nodes, clock skew, slow webhooks, the operator away, Kueue killed, a MultiKueue worker lost (bench/results/chaos.md)
	$(PYTHON) -m bench.chaos $(CHAOS_ARGS)
