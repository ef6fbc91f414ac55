"""`make bench`: the operator against the ceiling and Kubeflow's
training-operator, on the local control plane (``python -m bench.burst``;
__main__.py says what it runs). Scenario 3, at rest, is rest.py's; scenario
4, status latency, latency.py's."""
