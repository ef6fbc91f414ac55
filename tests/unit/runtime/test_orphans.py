"""The tracking finalizer off the pods of jobs that are gone (runtime.orphans)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from dlk8s.job.actions import Patch
from dlk8s.job.vocabulary import TRACKING_FINALIZER
from dlk8s.runtime.childindex import ChildIndex
from dlk8s.runtime.informer import ADDED, Cache
from dlk8s.runtime.orphans import Orphans


class Recorded:
    """Plays the executor and its pool: what would be patched, by job uid."""

    def __init__(self) -> None:
        self.patched: list[tuple[str, list[str]]] = []

    def execute(self, job: dict[str, Any], actions: list[Patch]) -> None:
        self.patched.append((job["metadata"]["uid"], [a.name for a in actions]))

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


def orphans(jobs: dict[str, str]) -> tuple[Orphans, ChildIndex, Recorded]:
    """`jobs`: name -> uid of the TFJobs still there."""
    cache = Cache()
    for name, uid in jobs.items():
        cache.put(f"ns/{name}", {"metadata": {"name": name, "namespace": "ns", "uid": uid}})
    index, recorded = ChildIndex(), Recorded()
    return Orphans(index, {"TFJob": cache}, recorded, recorded), index, recorded  # type: ignore[arg-type]


def test_a_pod_of_a_job_gone_or_replaced_by_a_namesake_is_let_go() -> None:
    found, _, recorded = orphans({"j": "new-uid"})
    found.seen(pod("j-worker-0", "old-uid"), synced=True)
    found.seen(pod("k-worker-0", "k-uid", job="k"), synced=True)
    assert recorded.patched == [("old-uid", ["j-worker-0"]), ("k-uid", ["k-worker-0"])]


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
    assert found.release_all() == 1
    assert recorded.patched == [("uid-0", ["old-worker-0", "old-ps-0"])]
