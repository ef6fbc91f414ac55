"""`make chaos`: the chaos suite (``python -m bench.chaos``; __main__.py says
what it runs). The runner: ``suite.Suite`` (a cluster, the chart, the
verdict of a scenario as a ``Row``), ``operators.Operators`` (the operator
processes, restarted like a kubelet would), ``ledger.Ledger`` (every pod
the suite saw, from a watch of its own), ``jobs`` (the jobs it submits)
and ``table`` (bench/results/chaos.md). The scenarios are in
``scenarios/``, one module each."""
