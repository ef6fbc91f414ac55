"""What a job is: pure functions from plain API objects to plain data.

May import: the standard library, PyYAML (config parsing), and ``dlk8s.job``
itself. Never ``dlk8s.runtime``, ``dlk8s.autoscaler``, ``dlk8s.cli``, the
Kubernetes client, threads or the clock: callers pass ``now``. That is what
makes ``reconcile`` a function of (job, observed children, config, now)
that a unit test can drive with dicts, and what mypy checks strictly.

Inside, lowest first (kept by tests/unit/project/test_layers.py): the words
(``vocabulary``: the API's labels, phases, states and reasons;
``childnames``: the names of a job's children; ``config``) -> ``objects``
(raw objects read leniently) -> ``actions``, ``conditions``, ``outcomes``
(what a pod's end means), ``computeresources`` -> ``failurepolicy``
(podFailurePolicy's rules) -> ``jobmodel`` (what a kind is; the one view of
a job) and ``validation`` -> ``children`` -> ``network`` -> ``env`` ->
``accelerators`` -> ``kinds/`` (one module or sub-package per kind) and
``kueue/`` (Kueue's Workload: what a queued job asks, where it stands,
the status edits Kueue leaves to us) -> ``reconcile/``.
"""
