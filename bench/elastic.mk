# `make bench-elastic`: elastic PaddleJobs replayed with and without the
# autoscaler on 8 kwok nodes x 8 GPUs (bench/elastic.py), one run of each mode
# per trace (bench/elastic-trace*.json: committed, heavy, burst). A benchmark,
# not a test: it prints the tables and writes bench/results/elastic.{json,md}
# and elastic-<trace>.png. About 36 minutes at the default --scale 0.08.
# ELASTIC_ARGS passes options, e.g.
#   make bench-elastic ELASTIC_ARGS="--trace heavy --only static"
ELASTIC_ARGS ?=

.PHONY: bench-elastic
bench-elastic: tools ## replay the elastic PaddleJob traces, autoscaler against static (bench/results/)
	$(PYTHON) bench/elastic.py run $(ELASTIC_ARGS)
