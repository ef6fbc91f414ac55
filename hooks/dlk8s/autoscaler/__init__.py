"""The elastic autoscaler of PaddleJobs (EDL's), as a pure plan and an I/O loop.

``plan``: the model of the cluster, the simulation of placing pods and the
plan of trainer counts. Pure: it may import ``dlk8s.job`` and the standard
library only. ``loop``: watches and patches; it may import ``plan``,
``dlk8s.job`` and ``dlk8s.runtime``. Nothing in ``dlk8s.job`` or
``dlk8s.runtime`` imports the autoscaler.
"""
