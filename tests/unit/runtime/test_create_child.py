"""create_child: only a create, or the job's own child found in its place,
may let the pass count the child as created; create_fresh_secret: a Secret
whose values are made as it is created, and one of that name is taken as it is."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from dlk8s.job.actions import create_actions
from dlk8s.runtime.errors import NamespaceTerminatingError, NotFoundError
from dlk8s.runtime.executor import (
    ChildNotCreatedError,
    Executor,
    NameTakenError,
    create_child,
    create_fresh_secret,
)
from dlk8s.runtime.expectations import Expectations

from ..support.controller import drain
from ..support.fakes import RecordingKube
from ..support.worlds import NOW

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


# --- a Secret made fresh (Create.fresh): created, never read -------------------------

SECRET = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"name": "j-redis", "namespace": "ns"},
    "type": "Opaque",
    "immutable": True,
}


def test_a_fresh_secret_gets_a_new_random_value_under_each_key() -> None:
    made = []
    for namespace in ("a", "b"):
        kube = RecordingKube()
        obj = {**SECRET, "metadata": {**SECRET["metadata"], "namespace": namespace}}
        assert create_fresh_secret(kube, obj, ("password",)) is True
        stored = kube.objects[("secrets", namespace, "j-redis")]
        assert sorted(stored["stringData"]) == ["password"]
        made.append(stored["stringData"]["password"])
    # 32 random bytes, URL-safe base64 without padding.
    assert [len(value) for value in made] == [43, 43]
    assert made[0] != made[1]
    assert "stringData" not in SECRET  # the manifest the pass built is left as it was


def test_a_secret_of_that_name_counts_as_made_and_is_not_read() -> None:
    kube = RecordingKube()
    kube.objects[("secrets", "ns", "j-redis")] = SECRET
    assert create_fresh_secret(kube, SECRET, ("password",)) is False
    assert kube.calls == [("create", "secrets", "ns", "j-redis")]


def test_a_create_that_found_its_object_tells_no_one_it_created_it(
    api_pool: ThreadPoolExecutor,
) -> None:
    kube = RecordingKube()
    kube.objects[("secrets", "ns", "j-redis")] = SECRET
    done = Executor(kube, Expectations(), api_pool, lambda: NOW)
    job = {"apiVersion": "dlk8s.io/v1alpha1", "kind": "Caffe2Job",
           "metadata": {"uid": JOB_UID, "namespace": "ns", "name": "j"}}  # fmt: skip
    actions = [*create_actions(SECRET, ("password",)), *create_actions(POD)]
    outcome = done.execute(job, actions)
    drain(api_pool)
    assert not outcome.failures
    assert [a.obj["kind"] for a in outcome.found] == ["Secret"]
    [event] = kube.events
    assert event["message"] == "Created pod j-worker-0"
