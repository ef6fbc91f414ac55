"""The finished path: a job whose status says Succeeded or Failed.

Only cleanup per cleanPodPolicy (which does not wait for a pod stuck
terminating on a node that no longer answers) and the TTL remain; a finished job never gets
a pod created again. A fresh verdict (from the active or invalid path) is
recorded here too: completionTime, the Succeeded or Failed condition, and the
event that says why.

Once cleanup is over (phase Done or Failed) and every pod counted has ended,
the status is final: pods removed later, by kube-controller-manager's pod
garbage collector (past --terminated-pod-gc-threshold) or by hand, do not
change the counts it shows: counting them again would rewrite thousands of
finished jobs' statuses as the collector works through a month of kept pods,
for no news about any of them.
"""

from __future__ import annotations

from datetime import datetime

from dlk8s.job.actions import Action, DeleteJob, Event, ReplaceStatus, delete_actions
from dlk8s.job.children import CONFIG_MAP, DEPLOYMENT, POD, SERVICE
from dlk8s.job.conditions import finished_conditions
from dlk8s.job.jobmodel import ChildView, JobView
from dlk8s.job.kueue.status import finished
from dlk8s.job.network import NETWORK_POLICY
from dlk8s.job.objects import (
    Obj,
    ReplicaStatus,
    as_dict,
    as_int,
    format_time,
    later,
)
from dlk8s.job.outcomes import FAILED, SUCCEEDED, has_stopped, pod_outcome, replica_status
from dlk8s.job.reconcile.stuck import stuck_at
from dlk8s.job.reconcile.view import Result, Verdict
from dlk8s.job.vocabulary import CleanPodPolicy, EventType, Phase, Reason, State

# Under cleanPodPolicy Running, how long a job that has succeeded lets the
# pods that still run end by themselves before they are deleted. Replicas
# often end together with the deciding one (MXNet's servers and workers with
# its scheduler, Caffe2's shards with their MASTER), but the kubelet reports
# each end a moment later: deleting them at once lost the logs of pods that
# had finished their work. Pods that never end by themselves (a PS) go when
# the grace is over. A failed job's pods are deleted at once: its peers
# would wait for the failed one forever.
CLEANUP_GRACE_SECONDS = 10.0

ENDED = (SUCCEEDED, FAILED)  # pod phases that never change again


def finish(job: JobView, verdict: Verdict | None, usable: bool) -> Result:
    """The status of a finished job, its cleanup and its TTL; with a verdict
    of this pass, the verdict recorded too. `usable`: whether the spec is
    (then its replicas are counted, else the pods by their labels)."""
    # completionTime as the status writes it (to the second), and parsed.
    completion, finished_at = job.stamp, job.now.replace(microsecond=0)
    if verdict is not None:
        state, reason = verdict.state, verdict.reason
    else:
        state = job.outcome or State.FAILED
        written = job.prev.get("reason")
        reason = written if isinstance(written, str) and written else state
        if job.completion_time and job.completed_at:
            completion, finished_at = job.completion_time, job.completed_at
    targets, stuck = _unless_stuck(job, cleanup_targets(job))
    # Services wait with the pods: a replica that is ending may still use them.
    grace = grace_left(job, state, finished_at) if any(k == POD for _, k in targets) else 0.0
    phase = Phase.CLEANUP if targets else (Phase.DONE if state == State.SUCCEEDED else Phase.FAILED)
    counts = final_counts(job) or finished_replica_statuses(job, usable)
    ttl_actions, requeue = ttl(job, finished_at)
    for wait in ([grace] if grace else []) + stuck:
        requeue = wait if requeue is None else min(requeue, wait)
    conditions = job.conditions
    actions: list[Action] = []
    if verdict is not None:
        succeeded = state == State.SUCCEEDED
        conditions = finished_conditions(conditions, succeeded, reason, verdict.message, job.stamp)
        kind = EventType.NORMAL if succeeded else EventType.WARNING
        actions.append(Event(kind, reason, verdict.message))
    why = f"the job has finished (cleanPodPolicy {job.policy.clean_pod_policy})"
    for child, api_kind in () if grace else targets:
        if not child.terminating:
            actions += delete_actions(child.obj, api_kind, why)
    message = verdict.message if verdict is not None else f"The job has {state.lower()}"
    succeeded = state == State.SUCCEEDED
    actions += [
        ReplaceStatus(w) for w in finished(job.children.workloads, succeeded, message, job.stamp)
    ]
    status = job.carried | {
        "completionTime": completion,
        "state": state,
        "phase": phase,
        "reason": reason,
        "conditions": conditions,
        "replicaStatuses": counts,
    }
    return Result(actions + ttl_actions, status, requeue)


def _unless_stuck(
    job: JobView, targets: list[tuple[ChildView, tuple[str, str]]]
) -> tuple[list[tuple[ChildView, tuple[str, str]]], list[float]]:
    """The cleanup's targets but pods stuck terminating on a node that does
    not answer (stuck.py): the cleanup cannot end them, and does not wait
    for them. Also the seconds until a terminating one would be stuck."""
    kept, waits = [], []
    for child, api_kind in targets:
        at = stuck_at(child) if api_kind == POD else None
        if at is not None and at <= job.now:
            continue
        if at is not None:
            waits.append((at - job.now).total_seconds())
        kept.append((child, api_kind))
    return kept, waits


def final_counts(job: JobView) -> list[object] | None:
    """The replica counts as last written, if they are final: the job's
    cleanup was over and every pod they counted had ended. None while they
    still follow the pods: under cleanPodPolicy None a job is Done while
    pods other than the deciding ones still run, and they end later."""
    if job.prev.get("phase") not in (Phase.DONE, Phase.FAILED):
        return None
    counts = job.prev.get("replicaStatuses")
    if not isinstance(counts, list) or not all(map(_all_ended, counts)):
        return None
    return counts


def _all_ended(entry: object) -> bool:
    states = as_dict(as_dict(entry).get("replicasStates"))
    return all(phase in ENDED or as_int(n, 0) == 0 for phase, n in states.items())


def grace_left(job: JobView, state: str, finished: datetime) -> float:
    """Seconds in which the running pods of a job that has succeeded may
    still end by themselves (0 when cleanup may go ahead)."""
    if state != State.SUCCEEDED:
        return 0.0
    if job.policy.clean_pod_policy != CleanPodPolicy.RUNNING:
        return 0.0
    return max(0.0, CLEANUP_GRACE_SECONDS - (job.now - finished).total_seconds())


def cleanup_targets(job: JobView) -> list[tuple[ChildView, tuple[str, str]]]:
    """What cleanPodPolicy removes once the job has finished.

    Running: pods in which a container still runs (a pod whose containers
    have all ended stays for `kubectl logs`; native sidecars, such as a
    Caffe2 MASTER's redis, are the kubelet's to stop), and every replica's
    Service (nothing is left to reach through them); after a success, once
    the grace is over (`grace_left`). All: every child, TensorBoard
    and ConfigMaps included. None: nothing. TensorBoard stays under Running
    and None: users look at the results after training; it goes with the job.
    """
    policy, owned = job.policy.clean_pod_policy, job.children
    if policy == CleanPodPolicy.NONE:
        return []
    if policy == CleanPodPolicy.ALL:
        return (
            [(o, POD) for o in owned.pods]
            + [(o, SERVICE) for o in owned.services]
            + [(o, CONFIG_MAP) for o in owned.configmaps]
            + [(o, DEPLOYMENT) for o in owned.deployments]
            + [(o, NETWORK_POLICY) for o in owned.networkpolicies]
        )
    roles = {role.lower() for role in job.kind.roles} if job.kind else set()
    pods = [(o, POD) for o in owned.pods if not has_stopped(o.obj)]
    return pods + [(o, SERVICE) for o in owned.services if (o.key or ("",))[0] in roles]


def ttl(job: JobView, finished: datetime) -> tuple[list[Action], float | None]:
    ttl = job.policy.ttl_seconds_after_finished
    if ttl is None:
        return [], None
    expiry = later(finished, ttl)
    if job.now < expiry:
        return [], (expiry - job.now).total_seconds()
    message = (
        f"Deleting the job: it finished at {format_time(finished)}"
        f" and ttlSecondsAfterFinished is {ttl}"
    )
    return [Event(EventType.NORMAL, Reason.TTL_EXPIRED, message), DeleteJob()], None


def finished_replica_statuses(job: JobView, usable: bool) -> list[ReplicaStatus]:
    """Pods by phase per replica of the spec (pods past a replica's count
    left out), or, for a spec that is not usable, per role the pods' labels
    name."""
    kind = job.kind
    labelled: dict[str, list[tuple[int, Obj]]] = {}
    for pod in job.children.pods:
        if pod.key is not None:
            labelled.setdefault(pod.key[0], []).append((pod.key[1], pod.obj))
    if kind is not None and usable:
        groups = [
            (r.role, r.replicas, [p for i, p in labelled.get(r.role.lower(), []) if i < r.replicas])
            for r in kind.replicas(job.raw)
        ]
    else:
        known = {role.lower(): role for role in kind.roles} if kind else {}
        named: dict[str, list[Obj]] = {}
        for label, members in labelled.items():
            named.setdefault(known.get(label, label.upper()), []).extend(p for _, p in members)
        groups = [(role, len(pods), pods) for role, pods in sorted(named.items())]
    container = kind.container if kind else ""
    return [
        replica_status(role, replicas, [pod_outcome(pod, container) for pod in pods])
        for role, replicas, pods in groups
    ]
