"""How the operator runs: everything that touches the API server or a thread.

May import: ``dlk8s.job`` (to decide), the Kubernetes client (auth, TLS,
config loading, leader election), orjson, urllib3, prometheus_client and the
standard library. Never ``dlk8s.autoscaler`` or ``dlk8s.cli``: the command
line wires them together. Only ``runtime.client`` sends requests; the other
modules see plain dicts and the error types of ``runtime.errors``.
"""
