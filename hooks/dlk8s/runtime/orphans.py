"""The pods of jobs that are gone, let go of.

Every pod carries the tracking finalizer until its end is in its job's
status (job.reconcile.tracking). Once the job itself is gone there is no
status to record anything in, and the garbage collector's delete of the
pod must not hang on the finalizer: it comes off the job's pods when the
job's deletion is seen, off any pod of a job that is gone whose event
comes later (a patch that lost a race with the garbage collector's delete),
and, once the caches are full at start-up, off the pods of jobs deleted
while no operator ran. When the operator itself is being uninstalled (its
Deployment gone as it stops), no one is left to count anything: it comes
off every pod, so that deleting a job or a namespace later is not held up.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import Executor as Pool
from concurrent.futures import ThreadPoolExecutor

from dlk8s.job.actions import release_of, tracked
from dlk8s.job.objects import Obj, dig
from dlk8s.runtime.childindex import ChildIndex, controller_ref
from dlk8s.runtime.client import Kube
from dlk8s.runtime.errors import ApiError, ConflictError, NotFoundError, TransportError
from dlk8s.runtime.executor import Api as PodApi
from dlk8s.runtime.executor import Executor, NamespaceDeletedError
from dlk8s.runtime.informer import Cache

log = logging.getLogger(__name__)

# Tries of one pod's release at uninstall: a patch that finds the pod
# changed since it was read reads it again.
RELEASE_TRIES = 3


def being_uninstalled(kube: Kube, deployment: str) -> bool | None:
    """Whether the operator's Deployment ("namespace/name") is gone or being
    deleted, as on `helm uninstall`, rather than rolled out or scaled; None
    when the API server cannot say."""
    namespace, _, name = deployment.partition("/")
    try:
        found = kube.get("apps/v1", "Deployment", namespace, name)
    except NotFoundError:
        return True
    except (ApiError, TransportError):
        return None
    return bool(dig(found, "metadata", "deletionTimestamp"))


def release_pod(api: PodApi, pod: Obj) -> bool:
    """Our finalizer off one pod, read again when it changed meanwhile;
    whether it is off (or the pod gone)."""
    for _ in range(RELEASE_TRIES):
        if not tracked(pod):
            return True
        action = release_of(pod)
        try:
            api.patch(action.api_version, action.kind, action.namespace, action.name, action.patch)
            return True
        except NotFoundError:
            return True
        except ConflictError:
            try:
                pod = api.get("v1", "Pod", action.namespace, action.name)
            except NotFoundError:
                return True
    return False


class Orphans:
    def __init__(
        self, children: ChildIndex, jobs: Mapping[str, Cache], executor: Executor, pool: Pool
    ) -> None:
        self._children = children  # the pods by the uid of their job
        self._jobs = jobs  # the job caches by kind: which jobs are still there
        self._api = executor.api  # the patches, and the reads again on a conflict
        self._pool = pool  # where they run: never on an informer's thread

    def release(self, uid: str) -> None:
        """The finalizer off the pods of the job `uid`, which is gone. Each is
        read again when the patch finds it changed: a namespace's deletion
        changes every pod as it deletes its job, and no later event of the
        pod need come to try again."""
        for pod in self._children.observed(uid).pods:
            if tracked(pod):
                self._pool.submit(_released, self._api, pod)

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
            self._pool.submit(_released, self._api, pod)

    def release_if_namespace_goes(self, uid: str, failures: list[Exception]) -> None:
        """The finalizer off the job's pods if a create of its pass was refused
        because its namespace is being deleted. The namespace deletes its pods
        before anything else (ordered namespace deletion, Kubernetes 1.33 and
        later), its jobs only once every pod is gone: holding a pod until the
        job goes would hold the namespace for ever, and nothing of the job's is
        left to count."""
        if any(isinstance(f, NamespaceDeletedError) for f in failures):
            self.release(uid)

    def release_gone(self) -> int:
        """The pods of every job no cache holds; how many jobs had some."""
        alive = {job["metadata"].get("uid") for c in self._jobs.values() for job in c.list()}
        gone = [uid for uid in self._children.owners() if uid not in alive]
        for uid in gone:
            self.release(uid)
        return len(gone)

    def release_everything(self, api: PodApi, parallel: int = 8) -> tuple[int, int]:
        """Our finalizer off every pod the caches hold (the operator is being
        uninstalled); (released, failed)."""
        pods = [
            pod
            for uid in self._children.owners()
            for pod in self._children.observed(uid).pods
            if tracked(pod)
        ]
        with ThreadPoolExecutor(parallel, thread_name_prefix="release") as pool:
            done = list(pool.map(lambda pod: _released(api, pod), pods))
        return sum(done), len(done) - sum(done)


def _released(api: PodApi, pod: Obj) -> bool:
    try:
        return release_pod(api, pod)
    except (ApiError, TransportError) as err:
        meta = pod.get("metadata", {})
        log.info(
            "tracking finalizer not removed",
            extra={"target": f"{meta.get('namespace')}/{meta.get('name')}", "error": repr(err)},
        )
        return False
