"""The elastic autoscaler (EDL's) of PaddleJobs and elastic PyTorchJobs, as a
pure plan and an I/O loop.

Pure (they may import ``dlk8s.job``, each other and the standard library
only): ``cluster``, the model of the cluster as the planner sees it, which
knows no job kind; ``manifests``, reading it from API objects (the adapter
of the kinds); ``simulation``, the simulated
copy of the cluster pods are placed on; ``accounting``, ``admission``,
``reservations`` and ``scaling``, the steps of a pass; ``plan``, the entry
point that composes them. ``loop``: watches and patches; it may import the
pure modules, ``dlk8s.job`` and ``dlk8s.runtime``. Nothing in ``dlk8s.job``
or ``dlk8s.runtime`` imports the autoscaler.
"""
