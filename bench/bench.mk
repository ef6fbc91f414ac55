# `make bench`: the operator against the ceiling on the local control plane
# (bench/burst/). A benchmark, not a test: it prints the table and writes
# bench/results/{results.json,results.md,pods-created.png,status-latency.png}.
# BENCH_ARGS passes options, e.g. `make bench BENCH_ARGS="--jobs 20 --big-workers 50"`.
BENCH_ARGS ?=

.PHONY: bench
bench: tools tools-bench ## benchmark the operator against a bare parallel creator and training-operator (bench/results/)
	$(PYTHON) -m bench.burst $(BENCH_ARGS)

# Kubeflow training-operator, and Kubeflow Trainer v2 with JobSet, the peers
# `make bench` runs the same bursts with (bench/common/training_operator.py,
# bench/common/trainer.py): builds of minutes that `make tools`, and so CI's
# `make test`, leaves out. Cached per user like the other tools.
.PHONY: tools-bench
tools-bench: tools ## build what only `make bench` needs: training-operator, Trainer v2 and JobSet (cached per user)
	tools/install.sh training-operator jobset trainer

# `make bench-scale`: the shapes users live with (bench/scale/): jobs
# arriving steadily, a burst on an empty cluster and among thousands of
# finished jobs, the operator restarted on that history, memory per
# thousand jobs; each beside the ceiling or the empty-cluster run of the same
# run. Writes bench/results/scale.{json,md} and its plots. SCALE_ARGS passes
# options, e.g. `make bench-scale SCALE_ARGS="--checkpoints 500,1000"`.
SCALE_ARGS ?=

.PHONY: bench-scale
bench-scale: tools ## the operator at scale: history, restart, memory, status latency, sustained arrival (bench/results/)
	$(PYTHON) -m bench.scale $(SCALE_ARGS)

# `make bench-kueue`: TFJobs through a Kueue ClusterQueue that admits a
# quarter of them at once, and the same jobs without a queue, in one run
# (bench/kueue/): per job, from its Workload's admission (without Kueue:
# from the job's creation) to its last pod created; and the same jobs as
# Kubeflow Trainer v2 TrainJobs through Kueue (`make tools-bench`). Writes
# bench/results/kueue.{json,md}. KUEUE_BENCH_ARGS passes options, e.g.
# `make bench-kueue KUEUE_BENCH_ARGS="--jobs 40 --quota-jobs 10 --out /tmp/kueue"`.
KUEUE_BENCH_ARGS ?=

.PHONY: bench-kueue
bench-kueue: tools tools-bench ## queued TFJobs: from Kueue's admission to their pods, beside the same jobs unqueued (bench/results/)
	$(PYTHON) -m bench.kueue $(KUEUE_BENCH_ARGS)

# `make bench-multikueue`: TFJobs submitted to a MultiKueue manager against
# the same jobs straight to a worker, on a manager and two workers of this
# machine (bench/multikueue/, docs/multicluster.md). Writes
# bench/results/multikueue.{json,md}. MULTIKUEUE_BENCH_ARGS passes options,
# e.g. `make bench-multikueue MULTIKUEUE_BENCH_ARGS="--jobs 20 --out /tmp/mk"`.
MULTIKUEUE_BENCH_ARGS ?=

.PHONY: bench-multikueue
bench-multikueue: tools ## jobs through a MultiKueue manager against the same jobs straight to a worker (bench/results/)
	$(PYTHON) -m bench.multikueue $(MULTIKUEUE_BENCH_ARGS)
