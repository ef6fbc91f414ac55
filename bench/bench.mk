# `make bench`: the operator against the ceiling on the local control plane
# (bench/bench.py). A benchmark, not a test: it prints the table and writes
# bench/results/{results.json,results.md,pods-created.png}. BENCH_ARGS passes
# options, e.g. `make bench BENCH_ARGS="--jobs 20 --big-workers 50"`.
BENCH_ARGS ?=

.PHONY: bench
bench: tools ## benchmark the operator against a bare parallel creator (bench/results/)
	$(PYTHON) bench/bench.py $(BENCH_ARGS)
