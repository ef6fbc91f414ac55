"""What the operator's caches keep of its jobs and of their children.

A pod as the API server sends it costs tens of kB as Python objects (49 kB
for a PaddleJob trainer: bench/results/elastic.md), most of it managedFields
and a spec nobody reads again; a job carries managedFields too. Thousands of
finished jobs keep their pods and Services (make bench-scale measures the
memory per thousand jobs), so the caches keep only what is read:

- of a child, what reconcile, the kinds and the executor read of a child
  they did not build: its identity, labels, annotations, owners, deletion,
  and of a pod its scheduling gates (a PaddleJob trainer's admission), its
  phase, failure reason and the end of each container. A
  new read of any other field must be added here: tests/unit/test_kept.py
  runs reconcile on whole and on kept children alike.
- of a job, everything but managedFields: the spec is validated on every
  pass, and a status write that leaves managedFields out keeps the server's.
"""

from __future__ import annotations

from typing import Final

from dlk8s.job.api import Obj, as_dict, dig

_CHILD_METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "labels",
    "annotations",
    "ownerReferences",
    "deletionTimestamp",
)
_POD_STATUS: Final = ("phase", "reason", "message")


def kept_child(obj: Obj) -> Obj:
    meta = as_dict(obj.get("metadata"))
    kept: Obj = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    kept["metadata"] = {k: meta[k] for k in _CHILD_METADATA if k in meta}
    gates = dig(obj, "spec", "schedulingGates")
    if gates:
        kept["spec"] = {"schedulingGates": gates}
    status = obj.get("status")
    if isinstance(status, dict):  # only a pod's has anything read
        kept["status"] = _pod_status(status)
    return kept


def _pod_status(status: Obj) -> Obj:
    kept: Obj = {k: status[k] for k in _POD_STATUS if k in status}
    containers = status.get("containerStatuses")
    if isinstance(containers, list):
        kept["containerStatuses"] = [_container(c) for c in containers if isinstance(c, dict)]
    return kept


def _container(status: Obj) -> Obj:
    kept: Obj = {k: status[k] for k in ("name",) if k in status}
    terminated = dig(status, "state", "terminated")
    if isinstance(terminated, dict):
        kept["state"] = {"terminated": terminated}
    return kept


def kept_job(job: Obj) -> Obj:
    meta = job.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return job
    return job | {"metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
