"""`make bench-elastic` and `make bench-elastic-model`: elastic PyTorchJobs
and PaddleJobs replayed with and without the autoscaler (``python -m
bench.elastic``; __main__.py says what it runs), and a model of the same
traces without reaction times (``python -m bench.elastic.model``).

- ``traces``: the kinds replayed, the traces (bench/elastic-trace*.json)
  and their targets, the names of the causes of waiting and idle GPUs;
- ``manifests``: a trace's job as a PaddleJob or a PyTorchJob;
- ``replay``: one trace replayed in each mode, each on a cluster of its own;
- ``driver``: the replay's driver (submits, plays the trainers, samples);
- ``podviews`` and ``causes``: what the sampler checks of the pods, and why
  a job waits or a GPU idles;
- ``summary``: one mode's figures; ``report``: the tables and plots;
- ``model``: the model of admission and growth orders.
"""
