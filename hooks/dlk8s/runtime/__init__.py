"""How the operator runs: everything that touches the API server or a thread.

May import: ``dlk8s.job`` (to decide), the Kubernetes client (auth, TLS,
config loading, leader election), orjson, urllib3, prometheus_client and the
standard library. Never ``dlk8s.autoscaler`` or ``dlk8s.cli``: the command
line wires them together. Only ``runtime.client`` sends requests; the
other modules (``runtime.leader``'s Lease calls included) go through it and
see plain dicts and the error types of ``runtime.errors``.

``resources`` (what is read and written) -> ``client`` (requests, watch
streams) -> ``informer`` (list + watch into a cache) -> ``controller`` (the
work queue, the retry contract) -> ``executor`` (actions; what the API
server refused) -> ``events`` (posted, a repeat counted on the one Event),
with ``workqueue``, ``expectations``, ``metrics``, ``health`` (what
/healthz and /readyz answer), ``logs`` and ``leader`` beside.
"""
