"""The tracking finalizer off the pods of jobs that are gone (runtime.orphans)."""

from __future__ import annotations

import copy
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from dlk8s.job.vocabulary import TRACKING_FINALIZER
from dlk8s.runtime.childindex import ChildIndex
from dlk8s.runtime.errors import ConflictError, NotFoundError
from dlk8s.runtime.executor import NamespaceDeletedError
from dlk8s.runtime.informer import ADDED, Cache
from dlk8s.runtime.orphans import Orphans, being_uninstalled


class Recorded:
    """Plays the executor's API and the pool: the pods patched, in order."""

    def __init__(self) -> None:
        self.patched: list[str] = []
        self.api = self

    def patch(
        self, api_version: str, kind: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        self.patched.append(name)
        return {}

    def submit(self, fn: Any, *args: Any) -> Future[None]:
        fn(*args)
        done: Future[None] = Future()
        done.set_result(None)
        return done


def pod(
    name: str, owner: str, job: str = "j", finalizers: tuple[str, ...] = (TRACKING_FINALIZER,)
) -> dict[str, Any]:
    ref = {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "name": job,
        "uid": owner,
        "controller": True,
    }
    meta = {"name": name, "namespace": "ns", "uid": f"{name}-uid", "resourceVersion": "5"}
    return {
        "kind": "Pod",
        "metadata": meta | {"ownerReferences": [ref], "finalizers": list(finalizers)},
    }


def orphans(jobs: dict[str, str], api: Any = None) -> tuple[Orphans, ChildIndex, Recorded]:
    """`jobs`: name -> uid of the TFJobs still there; `api`: what the patches
    go to (else the Recorded, which also plays the pool)."""
    cache = Cache()
    for name, uid in jobs.items():
        cache.put(f"ns/{name}", {"metadata": {"name": name, "namespace": "ns", "uid": uid}})
    index, recorded = ChildIndex(), Recorded()
    executor = SimpleNamespace(api=api or recorded)  # only its API is used
    return Orphans(index, {"TFJob": cache}, executor, recorded), index, recorded  # type: ignore[arg-type]


def test_a_pod_of_a_job_gone_or_replaced_by_a_namesake_is_let_go() -> None:
    found, _, recorded = orphans({"j": "new-uid"})
    found.seen(pod("j-worker-0", "old-uid"), synced=True)
    found.seen(pod("k-worker-0", "k-uid", job="k"), synced=True)
    assert recorded.patched == ["j-worker-0", "k-worker-0"]


def test_a_pod_of_a_live_job_untracked_or_seen_before_the_caches_are_full_is_kept() -> None:
    found, _, recorded = orphans({"j": "uid-1"})
    found.seen(pod("j-worker-0", "uid-1"), synced=True)
    found.seen(pod("j-worker-1", "gone", finalizers=()), synced=True)
    found.seen(pod("j-worker-2", "gone"), synced=False)
    assert recorded.patched == []


def test_at_start_up_the_pods_of_every_job_gone_are_let_go() -> None:
    found, index, recorded = orphans({"j": "uid-1"})
    for p in (
        pod("j-worker-0", "uid-1"),
        pod("old-worker-0", "uid-0", "old"),
        pod("old-ps-0", "uid-0", "old"),
    ):
        index.apply("pods", ADDED, p)
    assert found.release_gone() == 1
    assert recorded.patched == ["old-worker-0", "old-ps-0"]


class Pods:
    """Plays our client wrapper for the uninstall's release: pods by name,
    and the Deployment, if any."""

    def __init__(self, pods: list[dict[str, Any]], deployment: dict[str, Any] | None) -> None:
        self.pods = {p["metadata"]["name"]: copy.deepcopy(p) for p in pods}
        self.deployment = deployment
        self.calls: list[tuple[str, str]] = []

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        self.calls.append(("get", name))
        found = self.deployment if kind == "Deployment" else self.pods.get(name)
        if found is None:
            raise NotFoundError(404, "Not Found", {})
        return copy.deepcopy(found)

    def patch(
        self, api_version: str, kind: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> dict[str, Any]:
        self.calls.append(("patch", name))
        if name not in self.pods:
            raise NotFoundError(404, "Not Found", {})
        stored = self.pods[name]["metadata"]
        if patch["metadata"].get("resourceVersion") != stored["resourceVersion"]:
            raise ConflictError(409, "Conflict", {})
        stored["finalizers"] = patch["metadata"]["finalizers"] or []
        return stored


def test_uninstalled_is_the_deployment_gone_or_going_not_one_that_is_there() -> None:
    there = {"metadata": {"name": "dlk8s"}}
    going = {"metadata": {"name": "dlk8s", "deletionTimestamp": "t"}}
    assert being_uninstalled(Pods([], None), "dlk8s-system/dlk8s") is True  # type: ignore[arg-type]
    assert being_uninstalled(Pods([], going), "dlk8s-system/dlk8s") is True  # type: ignore[arg-type]
    assert being_uninstalled(Pods([], there), "dlk8s-system/dlk8s") is False  # type: ignore[arg-type]


def test_at_uninstall_every_pod_is_let_go_read_again_when_it_changed() -> None:
    kept = pod("j-worker-0", "uid-1", finalizers=("example.com/keep", TRACKING_FINALIZER))
    moved = pod("j-worker-1", "uid-1")
    found, index, _ = orphans({"j": "uid-1"})
    for p in (kept, moved, pod("old-ps-0", "uid-0", "old"), pod("free-0", "uid-1", finalizers=())):
        index.apply("pods", ADDED, p)
    server = Pods([kept, moved, pod("free-0", "uid-1", finalizers=())], None)
    server.pods["j-worker-1"]["metadata"]["resourceVersion"] = "6"  # changed since the cache
    assert found.release_everything(server, parallel=1) == (3, 0)  # type: ignore[arg-type]
    assert server.pods["j-worker-0"]["metadata"]["finalizers"] == ["example.com/keep"]
    assert server.pods["j-worker-1"]["metadata"]["finalizers"] == []
    assert ("patch", "free-0") not in server.calls  # untracked: nothing to do
    assert server.calls.count(("patch", "j-worker-1")) == 2


def test_a_job_gone_lets_go_of_a_pod_that_changed_since_the_cache_showed_it() -> None:
    """A namespace's deletion marks every pod deleted as it deletes the job:
    the patch from the cache's copy conflicts, and the pod is read again
    (no later event of the pod need come)."""
    going = pod("j-worker-0", "uid-1")
    server = Pods([going], None)
    server.pods["j-worker-0"]["metadata"] |= {"resourceVersion": "6", "deletionTimestamp": "t"}
    found, index, _ = orphans({}, api=server)
    index.apply("pods", ADDED, going)
    found.release("uid-1")
    assert server.pods["j-worker-0"]["metadata"]["finalizers"] == []
    assert server.calls == [("patch", "j-worker-0"), ("get", "j-worker-0"), ("patch", "j-worker-0")]


def test_a_job_whose_namespace_goes_lets_go_of_its_pods_though_it_is_still_there() -> None:
    """The namespace deletes its pods before its jobs (ordered namespace
    deletion): a create refused as the namespace goes releases the pods."""
    found, index, recorded = orphans({"j": "uid-1"})
    index.apply("pods", ADDED, pod("j-worker-0", "uid-1"))
    found.release_if_namespace_goes("uid-1", [ConflictError(409, "Conflict", {})])
    assert recorded.patched == []
    found.release_if_namespace_goes(
        "uid-1", [NamespaceDeletedError("its namespace is being deleted")]
    )
    assert recorded.patched == ["j-worker-0"]
