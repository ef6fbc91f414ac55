"""dlk8s's benchmarks: the operator measured on the local control plane.

One package, one sub-package per suite, each run as ``python -m bench.<suite>``
behind its make target (bench/README.md says which is which):

- ``bench.common``: what the suites share: the local cluster and one measured
  run (``harness``, ``context``, ``runs``), the ceiling (a bare creator of what
  the operator makes), the peers (``peers``: training-operator, and Trainer
  v2 with JobSet), the instruments
  (``api``, ``measure``, ``watcher``, ``servercosts``, ``pyspy``) and the two
  doors out of bench: ``operator`` (the only module that imports ``dlk8s``)
  and ``devtools`` (the only one that imports ``dlk8s_dev``).
- ``bench.burst`` (``make bench``), ``bench.scale`` (``make bench-scale``),
  ``bench.kueue`` (``make bench-kueue``): the operator against the ceiling.
- ``bench.chaos`` (``make chaos``): the chaos suite, its scenarios one module each.
- ``bench.elastic`` (``make bench-elastic``, ``make bench-elastic-model``): the
  elastic traces replayed, and a model of them.
- ``bench.reports``: the burst and scale suites' tables and plots.

``bench.common`` imports no other part of bench, ``bench.reports`` only
``bench.common``, and no suite imports another
(tests/unit/project/test_bench_layout.py).
"""
