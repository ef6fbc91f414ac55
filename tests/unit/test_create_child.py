"""create_child: only a create, or the job's own child found in its place,
may let the pass count the child as created."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.runtime.controller import ChildNotCreatedError, NameTakenError, create_child

JOB_UID = "job-uid"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j-worker-0", "namespace": "ns"}}


class FakeChildApi:
    """Our create/get wrapper: the create answers AlreadyExists (None) unless
    `creatable`, and the get finds `existing`."""

    def __init__(self, creatable: bool, existing: dict[str, Any] | None = None) -> None:
        self.creatable = creatable
        self.existing = existing
        self.gets: list[tuple[str, str, str | None, str]] = []

    def create(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        return {**obj, "metadata": {**obj["metadata"], "uid": "new"}} if self.creatable else None

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        self.gets.append((api_version, kind, namespace, name))
        return self.existing


def owned_by(uid: str) -> dict[str, Any]:
    ref = {"apiVersion": "dlk8s.io/v1alpha1", "kind": "TFJob", "name": "j", "uid": uid}
    return {**POD, "metadata": {**POD["metadata"], "ownerReferences": [ref | {"controller": True}]}}


def test_a_create_that_succeeds_needs_no_second_look() -> None:
    api = FakeChildApi(creatable=True)
    assert create_child(api, JOB_UID, POD) is True
    assert api.gets == []


def test_the_jobs_own_pod_in_the_way_is_not_a_new_create() -> None:
    api = FakeChildApi(creatable=False, existing=owned_by(JOB_UID))
    assert create_child(api, JOB_UID, POD) is False
    assert api.gets == [("v1", "Pod", "ns", "j-worker-0")]


@pytest.mark.parametrize("holder", [POD, owned_by("another-job")])
def test_a_name_held_by_anything_else_fails_with_the_name(holder: dict[str, Any]) -> None:
    api = FakeChildApi(creatable=False, existing=holder)
    with pytest.raises(NameTakenError, match="Pod j-worker-0 already exists and is not controlled"):
        create_child(api, JOB_UID, POD)


def test_a_name_freed_between_the_create_and_the_look_fails_the_pass() -> None:
    api = FakeChildApi(creatable=False, existing=None)
    with pytest.raises(ChildNotCreatedError) as caught:
        create_child(api, JOB_UID, POD)
    assert not isinstance(caught.value, NameTakenError)
