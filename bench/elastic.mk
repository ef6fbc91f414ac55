# `make bench-elastic`: elastic PaddleJobs replayed with and without the
# autoscaler on 8 kwok nodes x 8 GPUs (bench/elastic.py). A benchmark, not a
# test: it prints the table and writes bench/results/elastic.{json,md,png}.
# ELASTIC_ARGS passes options, e.g. `make bench-elastic ELASTIC_ARGS="--only static"`.
ELASTIC_ARGS ?=

.PHONY: bench-elastic
bench-elastic: tools ## replay the elastic PaddleJob trace, autoscaler against static (bench/results/)
	$(PYTHON) bench/elastic.py run $(ELASTIC_ARGS)
