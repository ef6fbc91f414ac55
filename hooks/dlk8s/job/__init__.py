"""What a job is: pure functions from plain API objects to plain data.

May import: the standard library, PyYAML (config parsing), and ``dlk8s.job``
itself. Never ``dlk8s.runtime``, ``dlk8s.autoscaler``, ``dlk8s.cli``, the
Kubernetes client, threads or the clock: callers pass ``now``. That is what
makes ``reconcile`` a function of (job, observed children, config, now)
that a unit test can drive with dicts, and what mypy checks strictly.
"""
