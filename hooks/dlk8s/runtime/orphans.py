"""The pods of jobs that are gone, let go of.

Every pod carries the tracking finalizer until its end is in its job's
status (job.reconcile.tracking). Once the job itself is gone there is no
status to record anything in, and the garbage collector's delete of the
pod must not hang on the finalizer: it comes off the job's pods when the
job's deletion is seen, off any pod of a job that is gone whose event
comes later (a patch that lost a race with the garbage collector's delete),
and, once the caches are full at start-up, off the pods of jobs deleted
while no operator ran.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Executor as Pool

from dlk8s.job.objects import Obj
from dlk8s.job.reconcile.tracking import release, tracked
from dlk8s.runtime.childindex import ChildIndex, controller_ref
from dlk8s.runtime.executor import Executor
from dlk8s.runtime.informer import Cache


class Orphans:
    def __init__(
        self, children: ChildIndex, jobs: Mapping[str, Cache], executor: Executor, pool: Pool
    ) -> None:
        self._children = children  # the pods by the uid of their job
        self._jobs = jobs  # the job caches by kind: which jobs are still there
        self._executor = executor  # the patches
        self._pool = pool  # where they run: never on an informer's thread

    def release(self, uid: str) -> None:
        """The finalizer off the pods of the job `uid`, which is gone."""
        patches = [release(pod) for pod in self._children.observed(uid).pods if tracked(pod)]
        if patches:
            self._pool.submit(self._executor.execute, {"metadata": {"uid": uid}}, list(patches))

    def seen(self, pod: Obj, synced: bool) -> None:
        """A pod's event: let it go if its job is gone. Not before the caches
        are `synced`: the children are listed before the jobs."""
        owner = controller_ref(pod)
        if not synced or owner is None or not tracked(pod):
            return
        kind, namespace = owner.get("kind", ""), pod["metadata"].get("namespace", "")
        cache = self._jobs.get(kind)
        job = cache.get_by_key(f"{namespace}/{owner.get('name', '')}") if cache else None
        if job is None or job["metadata"].get("uid") != owner.get("uid"):
            self._pool.submit(
                self._executor.execute, {"metadata": {"uid": owner["uid"]}}, [release(pod)]
            )

    def release_all(self) -> int:
        """The pods of every job no cache holds; how many jobs had some."""
        alive = {job["metadata"].get("uid") for c in self._jobs.values() for job in c.list()}
        gone = [uid for uid in self._children.owners() if uid not in alive]
        for uid in gone:
            self.release(uid)
        return len(gone)
