"""What a pass of an active job creates and deletes.

The pods missing from their slots, the kind's extras (ConfigMaps,
TensorBoard) and each replica's headless Service once its pod has an
address are created; strays, and children the spec no longer asks for, are
deleted. Existing children are left as they are, and only missing ones are
built, so a job at rest costs little.

Why a Service waits for its pod's address: the name it gives resolves only
once its Endpoints hold that address either way, but a Service made before
then is written by kube-controller-manager twice (its Endpoints and
EndpointSlice made empty, then updated with the address), and once made
after, once: in make bench's burst of 200 TFJobs x 4, 662 Endpoints and 538
EndpointSlice updates fewer, and kube-apiserver's CPU from 1.55x the bare
creator's to 1.33x (bench/results/before-after). A pod's address appearing
runs its job's pass soon (job.urgency), so the name resolves a fraction of
a second later than it would have; programs already wait for their peers'
names, which do not resolve before those peers have addresses.
"""

from __future__ import annotations

from collections.abc import Sequence

from dlk8s.job.accelerators import inject_accelerators
from dlk8s.job.actions import Action, create_actions, delete_actions
from dlk8s.job.childnames import free_pod_name
from dlk8s.job.children import CONFIG_MAP, DEPLOYMENT, POD, SERVICE, headless_service, pod_for_slot
from dlk8s.job.jobmodel import ChildView, JobContext, Slot
from dlk8s.job.kueue.workload import place
from dlk8s.job.network import NETWORK_POLICY, job_network_policy
from dlk8s.job.objects import Obj, dig
from dlk8s.job.reconcile.slots import SlotView
from dlk8s.job.reconcile.stuck import is_stuck

Target = tuple[Obj, tuple[str, str]]  # a child and its (apiVersion, kind)


def changes(
    ctx: JobContext, views: Sequence[SlotView], strays: Sequence[ChildView], restarts: int
) -> tuple[list[Action], list[SlotView]]:
    """The creates and deletes of the pass, and the slots whose pods it
    creates. `restarts`: the count each new pod carries in its annotation."""
    names = _missing_pods(ctx, views)
    creating = [view for view, _ in names]
    pods = [_build_pod(ctx, v.slot, restarts, name) for v, name in names]
    others, unwanted = _other_children(ctx, views)
    leftover = [(pod.obj, POD) for pod in strays if not pod.terminating]
    # The Secrets the pods read go with every pass that creates pods, not
    # only the first: they are never watched, so a pass cannot tell whether
    # they exist, and a create that finds one is a success (Create.fresh).
    secrets = ctx.kind.secrets(ctx) if pods else []
    actions = (
        _deletes(leftover, "it matches no replica of the spec")
        + [a for s in secrets for a in create_actions(s.manifest, s.fresh)]
        + [a for obj in pods + others for a in create_actions(obj)]
        + _deletes(unwanted, "the spec no longer asks for it")
    )
    return actions, creating


def _missing_pods(ctx: JobContext, views: Sequence[SlotView]) -> list[tuple[SlotView, str]]:
    """Slots whose pod is to be created now, and its name. A slot whose pod
    is being deleted is filled (it is its view's pod) until that pod is gone.
    A name held by another pod must be freed first (never two pods of one
    name), unless that pod is stuck terminating (stuck.py): then the
    replacement gets the next free name."""
    pods, job, now = ctx.job.children.pods, ctx.job.name, ctx.job.now
    taken = {pod.name for pod in pods}
    freed_first = {pod.name for pod in pods if not is_stuck(pod, now)}
    return [
        (v, free_pod_name(job, v.slot.role, v.slot.index, taken))
        for v in views
        if v.pod is None and v.slot.name not in freed_first
    ]


def _build_pod(ctx: JobContext, slot: Slot, restarts: int, name: str | None = None) -> Obj:
    pod = ctx.kind.decorate_pod(ctx, slot, pod_for_slot(ctx, slot, restarts, name))
    inject_accelerators(pod["spec"], ctx.config.accelerators)
    if ctx.placements is not None and slot.role in ctx.placements:
        pod = place(pod, ctx.placements[slot.role])
    return pod


def first_pods(ctx: JobContext) -> dict[str, Obj]:
    """The first pod of each role as a pass would create it: what a queued
    job's Workload asks Kueue for (every pod of a role asks for the same)."""
    firsts: dict[str, Obj] = {}
    for slot in ctx.slots:
        if slot.role not in firsts:
            firsts[slot.role] = _build_pod(ctx, slot, ctx.job.restarts)
    return firsts


def _other_children(ctx: JobContext, views: Sequence[SlotView]) -> tuple[list[Obj], list[Target]]:
    """Services, ConfigMaps, Deployments and NetworkPolicies: those missing (built; a
    replica's Service once its pod has an address), and those the spec no
    longer asks for."""
    extras = ctx.kind.extras(ctx)
    if ctx.config.network_policies:
        extras = [*extras, job_network_policy(ctx)]
    port_name = ctx.kind.port_name
    owned = ctx.job.children
    want = {(e["kind"], e["metadata"]["name"]) for e in extras}
    if port_name is not None:
        want |= {(SERVICE[1], slot.name) for slot in ctx.slots}
    existing = (
        [(o, SERVICE) for o in owned.services]
        + [(o, CONFIG_MAP) for o in owned.configmaps]
        + [(o, DEPLOYMENT) for o in owned.deployments]
        + [(o, NETWORK_POLICY) for o in owned.networkpolicies]
    )
    have = {(api_kind[1], o.name) for o, api_kind in existing}
    missing: list[Obj] = []
    if port_name is not None:
        missing += [
            headless_service(ctx, v.slot, port_name)
            for v in views
            if (SERVICE[1], v.slot.name) not in have and _has_address(v)
        ]
    missing += [obj for obj in extras if (obj["kind"], obj["metadata"]["name"]) not in have]
    unwanted = [
        (o.obj, api_kind)
        for o, api_kind in existing
        if (api_kind[1], o.name) not in want and not o.terminating
    ]
    return missing, unwanted


def _has_address(view: SlotView) -> bool:
    pod = view.pod
    return pod is not None and not pod.terminating and bool(dig(pod.obj, "status", "podIP"))


def _deletes(targets: Sequence[Target], why: str) -> list[Action]:
    return [a for obj, api_kind in targets for a in delete_actions(obj, api_kind, why)]
