"""create_child: only a create, or the job's own child found in its place,
may let the pass count the child as created."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.runtime.errors import NamespaceTerminatingError, NotFoundError
from dlk8s.runtime.executor import ChildNotCreatedError, NameTakenError, create_child

from ..support.fakes import RecordingKube

JOB_UID = "job-uid"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j-worker-0", "namespace": "ns"}}


def owned_by(uid: str) -> dict[str, Any]:
    ref = {"apiVersion": "dlk8s.io/v1alpha1", "kind": "TFJob", "name": "j", "uid": uid}
    return {**POD, "metadata": {**POD["metadata"], "ownerReferences": [ref | {"controller": True}]}}


def holding(obj: dict[str, Any]) -> RecordingKube:
    """An API where `obj` holds the pod's name."""
    kube = RecordingKube()
    kube.objects[("pods", "ns", "j-worker-0")] = obj
    return kube


def test_a_create_that_succeeds_needs_no_second_look() -> None:
    kube = RecordingKube()
    assert create_child(kube, JOB_UID, POD) is True
    assert kube.calls == [("create", "pods", "ns", "j-worker-0")]


def test_the_jobs_own_pod_in_the_way_is_not_a_new_create() -> None:
    kube = holding(owned_by(JOB_UID))
    assert create_child(kube, JOB_UID, POD) is False
    assert kube.calls == [
        ("create", "pods", "ns", "j-worker-0"),
        ("get", "pods", "ns", "j-worker-0"),
    ]


@pytest.mark.parametrize("holder", [POD, owned_by("another-job")])
def test_a_name_held_by_anything_else_fails_with_the_name(holder: dict[str, Any]) -> None:
    with pytest.raises(NameTakenError, match="Pod j-worker-0 already exists and is not controlled"):
        create_child(holding(holder), JOB_UID, POD)


def test_a_name_freed_between_the_create_and_the_look_fails_the_pass() -> None:
    kube = holding(owned_by(JOB_UID))
    kube.failures[("get", "j-worker-0")] = NotFoundError(404, "Not Found", {})
    with pytest.raises(ChildNotCreatedError) as caught:
        create_child(kube, JOB_UID, POD)
    assert not isinstance(caught.value, NameTakenError)


def test_a_namespace_being_deleted_is_not_taken_for_a_name_in_the_way() -> None:
    kube = RecordingKube()
    refusal = NamespaceTerminatingError(403, "Forbidden", {})
    kube.failures[("create", "j-worker-0")] = refusal
    with pytest.raises(NamespaceTerminatingError):
        create_child(kube, JOB_UID, POD)
    assert kube.calls == [("create", "pods", "ns", "j-worker-0")]  # no look for a holder
