# `make bench-elastic`: elastic PyTorchJobs and PaddleJobs (every other job
# of a trace a PyTorchJob) replayed together with and without the autoscaler
# on 8 kwok nodes x 8 GPUs (bench/elastic/), one run of each mode per trace
# (bench/elastic-trace*.json: committed, heavy, burst) and three of the heavy
# trace, judged on their median. A benchmark, not a test: it prints the
# tables and writes bench/results/elastic.{json,md} and elastic-<trace>.png.
# About an hour at the default --scale 0.08 (--replays 1: about 36 minutes).
# ELASTIC_ARGS passes options, e.g.
#   make bench-elastic ELASTIC_ARGS="--trace heavy --only static"
#   make bench-elastic ELASTIC_ARGS="--paddle-only"   # PaddleJobs only
#   make bench-elastic ELASTIC_ARGS="--trace burst --out /tmp/elastic"  # not bench/results
ELASTIC_ARGS ?=

.PHONY: bench-elastic
bench-elastic: tools ## replay the elastic traces (PyTorchJobs and PaddleJobs), autoscaler against static (bench/results/)
	$(PYTHON) -m bench.elastic run $(ELASTIC_ARGS)

# `make bench-elastic-model`: the same traces in a model without reaction
# times (bench/elastic/model.py, about 30 seconds): which orders of admission
# and growth could meet issue #18's targets at all. Writes
# bench/results/elastic-model.md.
.PHONY: bench-elastic-model
bench-elastic-model: tools ## model admission and growth orders on the elastic traces (bench/results/)
	$(PYTHON) -m bench.elastic.model
