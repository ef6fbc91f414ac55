"""The finished path: a job whose status says Succeeded or Failed.

Only cleanup per cleanPodPolicy and the TTL remain; a finished job never gets
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

from dlk8s.job.actions import Action, DeleteJob, Event
from dlk8s.job.api import (
    CleanPodPolicy,
    ConditionType,
    EventType,
    Obj,
    Observed,
    Phase,
    Reason,
    State,
    as_dict,
    as_int,
    format_time,
    parse_time,
)
from dlk8s.job.children import CONFIG_MAP, DEPLOYMENT, POD, SERVICE, is_terminating, replica_key
from dlk8s.job.policy import FAILED, SUCCEEDED, has_stopped, is_true
from dlk8s.job.reconcile.restarts import restart_count
from dlk8s.job.reconcile.status import carried, finished_replica_statuses, verdict_conditions
from dlk8s.job.reconcile.view import (
    JobView,
    Result,
    Verdict,
    delete_actions,
    later,
    valid_time,
)

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


def is_finished(job: JobView) -> bool:
    return job.prev.get("state") in (State.SUCCEEDED, State.FAILED) or any(
        is_true(job.conditions, t) for t in (ConditionType.SUCCEEDED, ConditionType.FAILED)
    )


def finish(
    job: JobView, owned: Observed, verdict: Verdict | None, restarts: int | None = None
) -> Result:
    status = carried(job, restart_count(job.prev, owned.pods) if restarts is None else restarts)
    conditions, actions = job.conditions, list[Action]()
    if verdict is not None:
        state, reason = verdict.state, verdict.reason
        status["completionTime"] = job.stamp
        conditions = verdict_conditions(conditions, verdict, job.stamp)
        actions.append(
            Event(
                EventType.NORMAL if state == State.SUCCEEDED else EventType.WARNING,
                reason,
                verdict.message,
            )
        )
    else:
        state, reason = finished_state(job)
        status["completionTime"] = valid_time(job.prev.get("completionTime")) or job.stamp
    targets = cleanup_targets(job, owned)
    # Services wait with the pods: a replica that is ending may still use them.
    grace = grace_left(job, state, status) if any(k == POD for _, k in targets) else 0.0
    why = f"the job has finished (cleanPodPolicy {job.policy.clean_pod_policy})"
    for obj, api_kind in () if grace else targets:
        if not is_terminating(obj):
            actions += delete_actions(obj, api_kind, why)
    phase = Phase.CLEANUP if targets else (Phase.DONE if state == State.SUCCEEDED else Phase.FAILED)
    status |= {
        "state": state,
        "phase": phase,
        "reason": reason,
        "conditions": conditions,
        "replicaStatuses": final_counts(job) or finished_replica_statuses(job, owned.pods),
    }
    ttl_actions, requeue = ttl(job, status)
    if grace:
        requeue = grace if requeue is None else min(requeue, grace)
    return Result(actions + ttl_actions, status, requeue)


def final_counts(job: JobView) -> list[Obj] | None:
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


def grace_left(job: JobView, state: str, status: Obj) -> float:
    """Seconds in which the running pods of a job that has succeeded may
    still end by themselves (0 when cleanup may go ahead)."""
    finished = parse_time(status.get("completionTime"))
    if state != State.SUCCEEDED or finished is None:
        return 0.0
    if job.policy.clean_pod_policy != CleanPodPolicy.RUNNING:
        return 0.0
    return max(0.0, CLEANUP_GRACE_SECONDS - (job.now - finished).total_seconds())


def finished_state(job: JobView) -> tuple[str, str]:
    state = job.prev.get("state")
    if state not in (State.SUCCEEDED, State.FAILED):
        state = (
            State.SUCCEEDED if is_true(job.conditions, ConditionType.SUCCEEDED) else State.FAILED
        )
    reason = job.prev.get("reason")
    return state, reason if isinstance(reason, str) and reason else state


def cleanup_targets(job: JobView, owned: Observed) -> list[tuple[Obj, tuple[str, str]]]:
    """What cleanPodPolicy removes once the job has finished.

    Running: pods in which a container still runs (a pod whose containers
    have all ended stays for `kubectl logs`; native sidecars, such as a
    Caffe2 MASTER's redis, are the kubelet's to stop), and every replica's
    Service (nothing is left to reach through them); after a success, once
    the grace is over (`grace_left`). All: every child, TensorBoard
    and ConfigMaps included. None: nothing. TensorBoard stays under Running
    and None: users look at the results after training; it goes with the job.
    """
    policy = job.policy.clean_pod_policy
    if policy == CleanPodPolicy.NONE:
        return []
    if policy == CleanPodPolicy.ALL:
        return (
            [(o, POD) for o in owned.pods]
            + [(o, SERVICE) for o in owned.services]
            + [(o, CONFIG_MAP) for o in owned.configmaps]
            + [(o, DEPLOYMENT) for o in owned.deployments]
        )
    roles = {role.lower() for role in job.kind.roles} if job.kind else set()
    pods = [(o, POD) for o in owned.pods if not has_stopped(o)]
    return pods + [(o, SERVICE) for o in owned.services if (replica_key(o) or ("",))[0] in roles]


def ttl(job: JobView, status: Obj) -> tuple[list[Action], float | None]:
    ttl = job.policy.ttl_seconds_after_finished
    finished = parse_time(status.get("completionTime"))
    if ttl is None or finished is None:
        return [], None
    expiry = later(finished, ttl)
    if job.now < expiry:
        return [], (expiry - job.now).total_seconds()
    message = (
        f"Deleting the job: it finished at {format_time(finished)}"
        f" and ttlSecondsAfterFinished is {ttl}"
    )
    return [Event(EventType.NORMAL, Reason.TTL_EXPIRED, message), DeleteJob()], None
