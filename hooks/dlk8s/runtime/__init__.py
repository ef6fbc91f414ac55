"""How the operator runs: everything that touches the API server or a thread.

May import: ``dlk8s.job`` (to decide), the Kubernetes client (auth, TLS,
config loading; not its informer or its leader election: ``informer`` and
``leader`` are our own), orjson, urllib3, prometheus_client and the
standard library. Never ``dlk8s.autoscaler`` or ``dlk8s.cli``: the command
line wires them together. Only ``runtime.client`` sends requests; the
other modules (``runtime.leader``'s Lease calls included) go through it and
see plain dicts and the error types of ``runtime.errors``.

The modules in the order they import each other, lowest first (kept by
tests/unit/project/test_layers.py): ``apiresources`` (what is read and
written), ``errors``, ``metrics``, ``logs`` (JSON lines, the reconcile id of
a pass) and the leaves beside them -> ``client`` (requests, watch streams)
-> ``informer`` (list + watch into a cache) and ``executor`` (actions; what
the API server refused), which posts through ``events`` (a repeat counted
on the one Event) -> ``controller`` (the work queue, the retry contract).
The controller keeps its state in collaborators of one lock at most:
``childindex`` (children by job), ``childevents`` (when a child's event runs
its job's pass), ``ownwrites`` (our writes the caches do not show yet, the
autoscaler's too), ``expectations``, ``passes`` (running passes, for
/healthz), ``lifecycle`` (start and stop), ``workqueue``. ``health`` (what
/healthz and /readyz answer) and ``leader`` stand beside. Two leaves are pure
rules over the job layer that only the runtime uses: ``kept`` (what the
caches keep of an object) and ``urgency`` (which changes of a child need its
job's pass at once).
"""
