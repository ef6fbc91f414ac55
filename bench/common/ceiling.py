"""The ceiling: a bare creator of exactly what the operator makes.

Its children come from the pure ``reconcile``: the pods of an empty world,
and the Services the operator creates once those pods have addresses;
serialized beforehand, only the job's uid filled in. It sends them with the
operator's API parallelism and its strict field validation, each job's
children as soon as its create returns, Services with their pods. No
operator logic, no watch, no status, no events: the limit of this cluster
for these objects, in the simplest order (the operator's Services wait for
addresses, which spares kube-controller-manager a write per Service that the
ceiling's order costs it: the report shows both).

Its endings: a job whose pods end by themselves (kwok's exit-code annotation,
after their run duration) asks for work when they have ended, whoever runs
it: what its cleanPodPolicy deletes (under Running, the default, its
replicas' Services, and with them kube-controller-manager's Endpoints and
EndpointSlices). The ceiling sends the deletes ``reconcile`` makes on a world
where every pod has ended, the run duration after the job's creates
returned, as the operator sends them (a uid precondition, background
propagation). Having no watch, it does not see the pods end: they end that
long after they started, a few hundredths of a second after their creates
returned, so its deletes come that much earlier than the operator's can.
A sustained run without them compared the operator's cleanup with nothing.
"""

from __future__ import annotations

import heapq
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from bench.common.api import Api
from bench.common.operator import (
    STRICT,
    ControllerConfig,
    Create,
    Delete,
    Observed,
    reconcile,
    runtime_id,
)

CHILD_PATHS = {"Pod": "/api/v1/namespaces/{ns}/pods", "Service": "/api/v1/namespaces/{ns}/services"}
EXIT_CODE = "kwok.dlk8s.io/exit-code"
RUN_DURATION = "kwok.dlk8s.io/run-duration"
PLACEHOLDER_UID = "00000000-0000-4000-8000-b3ac00000000"
# The operator creates with strict field validation: so does the ceiling,
# so that the ratio does not count the server's check as the operator's work.
STRICT_QUERY = urlencode(STRICT)

Child = tuple[str, str, bytes]  # kind, the collection's path, the body


@dataclass(frozen=True)
class Ending:
    """What a job's end asks for, and when: `after` seconds past its creates."""

    after: float
    deletes: tuple[tuple[str, str], ...]  # (the collection's path, name)


@dataclass(frozen=True)
class _World:
    job: dict[str, Any]  # with the placeholder uid and the status of its passes
    pods: list[dict[str, Any]]
    services: list[dict[str, Any]]
    created: list[dict[str, Any]]  # everything the first two passes create, in order


def _world(job: dict[str, Any], namespace: str, config: ControllerConfig) -> _World:
    """The operator's first pass on an empty world, and the pass that sees
    its pods' addresses (reconcile.changes): what they create."""
    fake = json.loads(json.dumps(job))
    fake["metadata"] |= {"namespace": namespace, "uid": PLACEHOLDER_UID, "generation": 1}
    now = datetime.now(UTC)
    first = reconcile(fake, Observed(), config, now)
    made = [a.obj for a in first.actions if isinstance(a, Create)]
    pods = [o for o in made if o["kind"] == "Pod"]
    addressed = [o | {"status": {"phase": "Pending", "podIP": "10.0.0.2"}} for o in pods]
    then = reconcile(fake | {"status": first.status}, Observed(pods=addressed), config, now)
    services = [a.obj for a in then.actions if isinstance(a, Create) and a.obj["kind"] == "Service"]
    return _World(fake | {"status": then.status}, pods, services, made + services)


def plan(
    job: dict[str, Any], namespace: str, config: ControllerConfig
) -> tuple[list[Child], Ending | None]:
    """What the operator creates for this job (serialized, with a placeholder
    uid), and its ending (ending_of), from one build of its world."""
    world = _world(job, namespace, config)
    children = [
        (o["kind"], CHILD_PATHS[o["kind"]].format(ns=namespace), json.dumps(o).encode())
        for o in world.created
    ]
    return children, _ending(job, world, namespace, config)


def with_uid(body: bytes, uid: str) -> bytes:
    return body.replace(PLACEHOLDER_UID.encode(), uid.encode()).replace(
        runtime_id(PLACEHOLDER_UID).encode(), runtime_id(uid).encode()
    )


def ending_of(job: dict[str, Any], namespace: str, config: ControllerConfig) -> Ending | None:
    """The deletes of the job's end, if all its pods end by themselves (None
    if any runs until it is deleted): reconcile's on the world where they
    have ended with their exit codes, its Services still there."""
    return plan(job, namespace, config)[1]


def _ending(
    job: dict[str, Any], world: _World, namespace: str, config: ControllerConfig
) -> Ending | None:
    after = run_seconds(job)
    if after is None:
        return None
    ended = [_ended(pod) for pod in world.pods]
    later = datetime.now(UTC) + timedelta(seconds=after)
    result = reconcile(world.job, Observed(pods=ended, services=world.services), config, later)
    deletes = tuple(
        (CHILD_PATHS[a.kind].format(ns=namespace), a.name)
        for a in result.actions
        if isinstance(a, Delete)
    )
    return Ending(after, deletes)


def run_seconds(job: dict[str, Any]) -> float | None:
    """How long the job's pods run before kwok ends them; None if one never ends."""
    longest = 0.0
    for replica in job["spec"]["replicaSpecs"]:
        annotations = (replica.get("template") or {}).get("metadata", {}).get("annotations", {})
        if EXIT_CODE not in annotations:
            return None
        longest = max(longest, go_seconds(annotations.get(RUN_DURATION, "0s")))
    return longest


_GO_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3}


def go_seconds(text: str) -> float:
    """A Go duration ("60s", "1m30s", "500ms") in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _GO_UNITS[u] for n, u in parts)


def _ended(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as kwok leaves it: every container terminated with its exit code."""
    code = int(pod["metadata"].get("annotations", {}).get(EXIT_CODE, "0"))
    containers = pod["spec"]["containers"]
    return pod | {
        "status": {
            "phase": "Succeeded" if code == 0 else "Failed",
            "podIP": "10.0.0.2",
            "containerStatuses": [
                {"name": c["name"], "state": {"terminated": {"exitCode": code}}} for c in containers
            ],
        }
    }


class Ceiling:
    """Sends each job's children once its create returns (submit_all's
    `then`), and its ending's deletes when they are due."""

    def __init__(
        self,
        api: Api,
        namespace: str,
        jobs: list[dict[str, Any]],
        config: ControllerConfig,
        parallelism: int,
    ) -> None:
        self._api = api
        plans = {j["metadata"]["name"]: plan(j, namespace, config) for j in jobs}
        self._children = {name: children for name, (children, _) in plans.items()}
        self._endings = {name: ending for name, (_, ending) in plans.items()}
        self._pool = ThreadPoolExecutor(parallelism, thread_name_prefix="ceiling")
        self._timers = _Timers(self._pool)
        self._creates: list[Future[None]] = []
        self._deletes: list[Future[None]] = []
        self._lock = threading.Lock()
        self._left: dict[str, int] = {}  # creates still out, by job
        self._uids: dict[tuple[str, str], str] = {}  # a child's uid: the delete's precondition
        self.create_times: list[float] = []
        self.endings_sent = 0

    def children(self) -> int:
        return sum(len(c) for c in self._children.values())

    def then(self, sub: Any) -> None:
        """Submit the job's creates (`sub`: harness.Submission, its uid known)."""
        children = self._children[sub.name]
        self._left[sub.name] = len(children)
        for _kind, path, body in children:
            future = self._pool.submit(self._create, sub.name, path, with_uid(body, sub.uid))
            self._creates.append(future)

    def wait_created(self) -> None:
        for future in list(self._creates):
            future.result()

    def stop(self) -> None:
        """End of the measured window: endings not yet due are dropped, the
        deletes under way finish (their failures raise)."""
        self._timers.stop()
        self._pool.shutdown(wait=True)
        for future in self._creates + self._deletes:
            future.result()

    def _create(self, job: str, path: str, body: bytes) -> None:
        # As the operator's client sends them (runtime.client.Kube.create).
        status, data = self._api.request("POST", f"{path}?{STRICT_QUERY}", body)
        if status != 201:
            raise RuntimeError(f"ceiling create {path}: {status} {data[:300]!r}")
        now = time.monotonic()
        ending = self._endings[job]
        # Only an ending reads the answer (a burst's ceiling sends and forgets).
        meta = json.loads(data)["metadata"] if ending is not None else None
        with self._lock:
            self.create_times.append(now)
            if meta is not None:
                self._uids[(path, meta["name"])] = meta["uid"]
            self._left[job] -= 1
            done = self._left[job] == 0
        if done and ending is not None:
            self._timers.at(now + ending.after, lambda: self._end(ending))

    def _end(self, ending: Ending) -> None:
        with self._lock:
            self.endings_sent += 1
        for path, name in ending.deletes:
            self._deletes.append(self._pool.submit(self._delete, path, name))

    def _delete(self, path: str, name: str) -> None:
        # As runtime.client.Kube.delete sends it: guarded by the uid.
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": "Background",
            "preconditions": {"uid": self._uids[(path, name)]},
        }
        status, data = self._api.request("DELETE", f"{path}/{name}", json.dumps(options).encode())
        if status not in (200, 202):
            raise RuntimeError(f"ceiling delete {path}/{name}: {status} {data[:300]!r}")


class _Timers:
    """Calls submitted to a pool when due, from one thread (not one per job)."""

    def __init__(self, pool: ThreadPoolExecutor) -> None:
        self._pool = pool
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()  # ties: first scheduled, first due
        self._cv = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="ceiling-endings", daemon=True)
        self._thread.start()

    def at(self, when: float, call: Callable[[], None]) -> None:
        with self._cv:
            heapq.heappush(self._due, (when, next(self._order), call))
            self._cv.notify()

    def stop(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()
        self._thread.join()

    def _run(self) -> None:
        with self._cv:
            while not self._stopped:
                wait = self._due[0][0] - time.monotonic() if self._due else None
                if wait is not None and wait <= 0:
                    call = heapq.heappop(self._due)[2]
                    call()  # only submits to the pool: quick under the lock
                    continue
                self._cv.wait(wait)
