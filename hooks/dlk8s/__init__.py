"""dlk8s: distributed deep-learning training jobs on Kubernetes.

The package is four layers; each folder's docstring says what it may import,
and tests/unit/project/test_layers.py fails when one reaches further (or
when a module imports one above it inside its layer):

- ``dlk8s.job``: what a job is. Pure functions over plain data (the kinds,
  reconcile, status, restart accounting, validation, naming, env,
  accelerators, config). No client, no threads, no clock of its own.
- ``dlk8s.autoscaler``: the elastic autoscaler. Its model, simulation and plan
  are pure (they may use ``dlk8s.job``); its loop is I/O (it may use
  ``dlk8s.runtime``).
- ``dlk8s.runtime``: how the operator runs. Everything that touches the API
  server or a thread: the client and its error types, informers, the work
  queue, expectations, the controller loop, the executor of actions and its
  events, leader election, metrics, logs.
- ``dlk8s.cli``: the ``dlk8s-operator`` command (``run``; ``smoke``, which
  ``helm test`` runs; ``convert``, which rewrites the seed operators' jobs).
  It wires the others together.

Development tooling (the local cluster, deploy helpers, the demo) is a second
package, ``dlk8s_dev`` under ``dev/``, which the operator image never installs.
See docs/architecture.md for the path of one event from watch to status.
"""
