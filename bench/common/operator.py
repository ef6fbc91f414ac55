"""bench's only door into the operator, dlk8s: every name bench uses of it,
each for a reason below. No other module of bench imports ``dlk8s``
(tests/unit/project/test_bench_layout.py), so when the operator's modules
move or are renamed, this file is the one that follows them.

The API server, through the operator's own client (the chaos suite and the
elastic replay watch and write as the operator does):

- ``Kube``, ``Scope``, ``Selectors``: requests, and what they cover;
- ``STRICT``: the strict field validation the operator creates with (the
  ceiling creates with it too, so that the server's check is not counted as
  the operator's work);
- ``ApiError``, ``TransportError``: what a failed request raises;
- ``Informer`` and its events ``ADDED``, ``MODIFIED``, ``DELETED``: a cache
  kept by a watch;
- ``JOB_RESOURCES``, ``resource_for``: the API resources of the job kinds,
  and of any other kind.

What a job is, to make the operator's objects, name them and read them:

- ``API_VERSION``, ``KUEUE_API_VERSION`` and the labels ``LABEL_JOB_NAME``,
  ``LABEL_REPLICA_TYPE``, ``LABEL_REPLICA_INDEX``, ``LABEL_QUEUE_NAME``,
  ``LABEL_PRIORITY_CLASS``;
- ``pod_name``, ``runtime_id``: the name the operator gives a replica's pod,
  and the runtime id its children carry;
- ``ControllerConfig``, ``load_config``: the controller config the chart
  renders;
- ``reconcile``, ``Observed``, ``Create``, ``Delete``: the pure reconcile and
  its actions, from which the ceiling takes exactly what the operator
  creates and deletes.

Quantities and the autoscaler's view of the cluster (the elastic replay's
checks, the Kueue chaos scenario's quota):

- ``Resources``, ``from_list``, ``parse_quantity``: resource quantities;
- ``Pod``, ``pod_from_manifest``: a pod as the autoscaler's plan sees it;
- ``CountAnnotations``, ``TRAINERS``, ``WORKERS``: where an elastic PaddleJob
  and an elastic PyTorchJob show the count the autoscaler asks for.
"""

from __future__ import annotations

from dlk8s.autoscaler.cluster import Pod
from dlk8s.autoscaler.manifests import pod_from_manifest
from dlk8s.job.actions import Create, Delete
from dlk8s.job.childnames import pod_name, runtime_id
from dlk8s.job.computeresources import Resources, from_list, parse_quantity
from dlk8s.job.config import ControllerConfig, load_config
from dlk8s.job.jobmodel import Observed
from dlk8s.job.kinds.elastic import CountAnnotations
from dlk8s.job.kinds.paddlejob.spec import TRAINERS
from dlk8s.job.kinds.pytorchjob import WORKERS
from dlk8s.job.reconcile import reconcile
from dlk8s.job.vocabulary import (
    API_VERSION,
    KUEUE_API_VERSION,
    LABEL_JOB_NAME,
    LABEL_PRIORITY_CLASS,
    LABEL_QUEUE_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)
from dlk8s.runtime.apiresources import JOB_RESOURCES, resource_for
from dlk8s.runtime.client import STRICT, Kube, Scope, Selectors
from dlk8s.runtime.errors import ApiError, TransportError
from dlk8s.runtime.informer import ADDED, DELETED, MODIFIED, Informer

__all__ = [
    "ADDED",
    "API_VERSION",
    "DELETED",
    "JOB_RESOURCES",
    "KUEUE_API_VERSION",
    "LABEL_JOB_NAME",
    "LABEL_PRIORITY_CLASS",
    "LABEL_QUEUE_NAME",
    "LABEL_REPLICA_INDEX",
    "LABEL_REPLICA_TYPE",
    "MODIFIED",
    "STRICT",
    "TRAINERS",
    "WORKERS",
    "ApiError",
    "ControllerConfig",
    "CountAnnotations",
    "Create",
    "Delete",
    "Informer",
    "Kube",
    "Observed",
    "Pod",
    "Resources",
    "Scope",
    "Selectors",
    "TransportError",
    "from_list",
    "load_config",
    "parse_quantity",
    "pod_from_manifest",
    "pod_name",
    "reconcile",
    "resource_for",
    "runtime_id",
]
