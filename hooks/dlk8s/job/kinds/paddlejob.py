"""PaddleJob: PaddlePaddle EDL's elastic TrainingJob.

The spec is EDL's, in camelCase (see crds/paddlejobs.dlk8s.io.yaml): one
`image`, pserver ports from `port` (`portsNum` dense plus `portsNumForSparse`
sparse ones), `faultTolerant`, and `trainer`/`pserver` blocks with
`minInstance`, `maxInstance` and `resources`. The operator builds every pod
itself (there are no pod templates), as EDL's job parser did:

- MASTER (only when faultTolerant): one pod holding the task queue, with
  EDL's etcd container beside it; EDL's master resources (1 CPU / 500Mi
  requested, 2 CPU / 1Gi limit) unless `spec.master.resources` says otherwise.
- PSERVER: `pserver.minInstance` pods. Pservers never scale (the CRD and the
  operator require minInstance = maxInstance).
- TRAINER: indices 0..n-1, where n is the job's trainer count (below).

Each pod gets a headless Service `{job}-{role}-{index}`, EDL's command
(`paddle_k8s start_new_trainer|start_new_pserver|start_master` when fault
tolerant, `start_trainer v2|start_pserver` otherwise; on an image without
paddle_k8s, ENTRY in TRAINER_PACKAGE, see LAUNCHER) and EDL's labels
(`paddle-job`, `paddle-job-pserver`, `paddle-job-master`), so EDL's images,
which find their peers through those labels, work unchanged. The main
container is `paddle` in every role; it decides a pod's outcome.

The trainer count. The job's annotation `dlk8s.io/trainers` asks for a
count; the autoscaler writes it, and a user may too (`kubectl annotate`).
The operator keeps it within [trainer.minInstance, trainer.maxInstance]; with
no usable annotation the count is minInstance. `status.trainers` is the count
the operator runs (the `Trainers` printer column), with `lastScaleTime` and
`lastScaleReason` for the last change, and every change is an event on the
job. Scaling up creates the next indices; scaling down deletes the highest
ones. The reason comes from the annotation `dlk8s.io/trainers-reason` when
it starts with the count it explains (e.g. "4: 3 GPUs free"); the
autoscaler writes it that way.

The live count. EDL put the count in `TRAINERS` once, when a pod started, so
it went stale as soon as the job scaled (a known EDL bug). Here every pod of
the job carries the annotation `dlk8s.io/trainers`, kept current with merge
patches (same pod, no restart), and sees it as the file /etc/dlk8s/trainers
(a downward-API volume; the kubelet refreshes it within its sync period). The
variable DLK8S_TRAINERS_FILE names that file.

Variables of every `paddle` container (EDL's podEnv), and where each comes
from:
  PADDLE_JOB_NAME                   the job's name
  TRAINERS                          the trainer count when this pod was created
                                    (EDL: minInstance; the same for a job whose
                                    minInstance = maxInstance). The live count
                                    is in DLK8S_TRAINERS_FILE.
  PSERVERS                          pserver.minInstance
  ENTRY                             trainer.entrypoint
  TRAINER_PACKAGE                   trainer.workspace ("" when unset)
  PADDLE_INIT_PORT                  port
  PADDLE_INIT_PORTS_NUM             portsNum
  PADDLE_INIT_PORTS_NUM_FOR_SPARSE  portsNumForSparse
  PADDLE_INIT_NUM_GRADIENT_SERVERS  as TRAINERS (the trainers a non-fault-
                                    tolerant pserver waits for)
  PADDLE_INIT_NUM_PASSES            trainer.passes
  PADDLE_INIT_TRAINER_COUNT         threads per trainer: the trainer's GPUs
                                    when it asks for GPUs, else its CPU cores
                                    rounded down and at least 1 (EDL wrote 0
                                    for a trainer of less than one core)
  PADDLE_INIT_USE_GPU               "1" when trainers ask for GPUs, else "0"
  NAMESPACE, POD_IP                 from the downward API
  DLK8S_TRAINERS_FILE               /etc/dlk8s/trainers (see above)
EDL's deprecated TOPOLOGY (a copy of ENTRY) and its hard-coded
LD_LIBRARY_PATH are left out: the controller config's accelerators set
driver paths per cloud.

The outcome, as EDL's trainers decided it: the job succeeds when every
trainer has exited 0 (they completed their passes; a fault-tolerant job's
trainers stop when the master's task queue is empty). A trainer that fails
for good (exit 1-127) fails a job that is not fault tolerant; in a fault-
tolerant job any failed trainer is recreated (the master hands its tasks to
others), bounded by runPolicy.backoffLimit. Failed pservers and masters are
recreated. A trainer removed by scaling down is not a restart.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from decimal import ROUND_FLOOR
from typing import Any, Final

from dlk8s.job.actions import Action, Event, Patch
from dlk8s.job.api import (
    MAX_REPLICAS,
    EventType,
    JobContext,
    Kind,
    Obj,
    Observed,
    Replica,
    RestartPolicy,
    Slot,
    as_dict,
    as_list,
    dig,
    is_int,
    show,
)
from dlk8s.job.children import (
    containers_named,
    is_terminating,
    name_of,
    replica_key,
    restricted_security_context,
)
from dlk8s.job.config import DEFAULT_ETCD_IMAGE
from dlk8s.job.env import set_env
from dlk8s.job.naming import label_value
from dlk8s.job.resources import cpu_cores, gpu_count
from dlk8s.job.validation import int_between, port_problems, resources_problems

KIND: Final = "PaddleJob"
MASTER: Final = "MASTER"
PSERVER: Final = "PSERVER"
TRAINER: Final = "TRAINER"
CONTAINER: Final = "paddle"
PORT_NAME: Final = "paddle-port"

DEFAULT_PORT: Final = 7164
DEFAULT_PORTS_NUM: Final = 1
DEFAULT_PORTS_NUM_FOR_SPARSE: Final = 0  # the CRD's default
DEFAULT_PASSES: Final = 1
MASTER_PORT: Final = 8080
ETCD_PORT: Final = 2379
ETCD_CONTAINER: Final = "etcd"
# EDL's single-member etcd, reachable on the pod's IP.
_ETCD_FLAGS: Final = (
    ("-name", "etcd0"),
    ("-advertise-client-urls", "http://$(POD_IP):2379,http://$(POD_IP):4001"),
    ("-listen-client-urls", "http://0.0.0.0:2379,http://0.0.0.0:4001"),
    ("-initial-advertise-peer-urls", "http://$(POD_IP):2380"),
    ("-listen-peer-urls", "http://0.0.0.0:2380"),
    ("-initial-cluster", "etcd0=http://$(POD_IP):2380"),
    ("-initial-cluster-state", "new"),
    # A volume of its own: as nobody it cannot write to the image's root.
    ("-data-dir", "/var/lib/etcd"),
)
ETCD_DATA_VOLUME: Final = "etcd-data"
ETCD_COMMAND: Final = ["etcd", *(part for flag in _ETCD_FLAGS for part in flag)]
MASTER_RESOURCES: Final[Obj] = {
    "requests": {"cpu": "1", "memory": "500Mi"},
    "limits": {"cpu": "2", "memory": "1Gi"},
}
EDL_LABELS: Final = {
    TRAINER: "paddle-job",
    PSERVER: "paddle-job-pserver",
    MASTER: "paddle-job-master",
}

ANNOTATION_TRAINERS: Final = "dlk8s.io/trainers"
ANNOTATION_TRAINERS_REASON: Final = "dlk8s.io/trainers-reason"
# How much of a reason the annotation keeps, and how much status and events show.
MAX_REASON: Final = 1000
SHOWN_REASON: Final = 300
# A trainer created while the autoscaler keeps nodes for a starving job
# carries this scheduling gate until its job has a trainer count (the
# autoscaler's admission, or a user's): see config.Admission.
ADMISSION_GATE: Final = "dlk8s.io/admission"
TRAINERS_VOLUME: Final = "dlk8s-trainers"
TRAINERS_DIR: Final = "/etc/dlk8s"
TRAINERS_FILE: Final = f"{TRAINERS_DIR}/trainers"
REASON_SCALED: Final = "TrainersScaled"
STATUS_FIELDS: Final = ("trainers", "lastScaleTime", "lastScaleReason")
_FINISHED: Final = ("Succeeded", "Failed")


# --- reading the spec (lenient: also used before validation) -------------------


def trainer_bounds(job: object) -> tuple[int, int] | None:
    """(minInstance, maxInstance) of the trainers, or None if unusable."""
    low = dig(job, "spec", "trainer", "minInstance")
    high = dig(job, "spec", "trainer", "maxInstance")
    if not (is_int(low) and is_int(high) and 1 <= low <= high <= MAX_REPLICAS):
        return None
    return low, high


def is_elastic(job: object) -> bool:
    bounds = trainer_bounds(job)
    return bounds is not None and bounds[0] < bounds[1]


def requested_trainers(job: object) -> int | None:
    """The count the annotation dlk8s.io/trainers asks for, if it is a number."""
    value = dig(job, "metadata", "annotations", ANNOTATION_TRAINERS)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        text = value.strip()
        return int(text) if len(text) < 10 else MAX_REPLICAS
    return None


def is_admission_gate(gate: object) -> bool:
    """One of a pod's spec.schedulingGates is ours."""
    return isinstance(gate, dict) and gate.get("name") == ADMISSION_GATE


def awaits_admission(ctx: JobContext) -> bool:
    """New trainers of this job are to wait behind ADMISSION_GATE."""
    admission = ctx.config.admission
    return (
        admission is not None
        and admission.closed
        and is_elastic(ctx.job)
        and requested_trainers(ctx.job) is None
    )


def trainer_count(job: object) -> int | None:
    """The trainers the job runs: the annotation's count kept within
    [minInstance, maxInstance], else minInstance. None if the bounds are unusable."""
    bounds = trainer_bounds(job)
    if bounds is None:
        return None
    low, high = bounds
    asked = requested_trainers(job)
    return low if asked is None else min(high, max(low, asked))


@dataclass(frozen=True)
class TrainerDecision:
    """A trainer count chosen for a job, and why: what the autoscaler decides
    and what a user may write by hand, as the job's annotations carry it.

    The count goes in dlk8s.io/trainers; the reason in
    dlk8s.io/trainers-reason as "<count>: <reason>", so a reason is only
    ever shown next to the count it was given for (a later hand-set count
    makes a stale reason fall back to the plain explanation).
    """

    trainers: int
    reason: str

    def annotations(self) -> dict[str, str]:
        reason = f"{self.trainers}: {self.reason}"[:MAX_REASON]
        return {ANNOTATION_TRAINERS: str(self.trainers), ANNOTATION_TRAINERS_REASON: reason}

    @staticmethod
    def reason_on(job: object, count: int) -> str | None:
        """The reason the job's annotation gives for `count`, if it gives one."""
        written = dig(job, "metadata", "annotations", ANNOTATION_TRAINERS_REASON)
        prefix = f"{count}: "
        if isinstance(written, str) and written.startswith(prefix) and len(written) > len(prefix):
            return written[len(prefix) :][:SHOWN_REASON]
        return None


def scale_reason(job: object, count: int) -> str:
    """Why the job runs `count` trainers, for status and events."""
    given = TrainerDecision.reason_on(job, count)
    if given is not None:
        return given
    raw = dig(job, "metadata", "annotations", ANNOTATION_TRAINERS)
    asked = requested_trainers(job)
    if raw is None:
        return "no dlk8s.io/trainers annotation: trainer.minInstance"
    if asked is None:
        return f"dlk8s.io/trainers is not a count ({show(raw)}): trainer.minInstance"
    if asked != count:
        return f"dlk8s.io/trainers asks for {asked}, kept within minInstance..maxInstance"
    return "set by the dlk8s.io/trainers annotation"


def _fault_tolerant(job: Obj) -> bool:
    return dig(job, "spec", "faultTolerant") is True


def _int_field(spec: Obj, key: str, default: int) -> int:
    value = spec.get(key)
    return value if is_int(value) else default


# --- validation ----------------------------------------------------------------------


def validate(job: Obj) -> list[str]:
    spec = job.get("spec")
    if not isinstance(spec, dict):
        return ["spec: must be an object"]
    problems: list[str] = []
    image = spec.get("image")
    if not isinstance(image, str) or not image:
        problems.append("spec.image: must be a non-empty string")
    problems += port_problems("spec.port", spec.get("port"))
    problems += int_between("spec.portsNum", spec.get("portsNum"), 1, 65535)
    problems += int_between("spec.portsNumForSparse", spec.get("portsNumForSparse"), 0, 65535)
    if not problems:
        last = (
            _int_field(spec, "port", DEFAULT_PORT)
            + _int_field(spec, "portsNum", DEFAULT_PORTS_NUM)
            + _int_field(spec, "portsNumForSparse", DEFAULT_PORTS_NUM_FOR_SPARSE)
        )
        if last > 65536:
            problems.append(
                "spec.port: port + portsNum + portsNumForSparse must stay within 65536"
                " (the ports each pserver opens)"
            )
    if spec.get("faultTolerant") not in (None, True, False):
        problems.append("spec.faultTolerant: must be true or false")
    problems += _trainer_problems(spec.get("trainer"))
    problems += _pserver_problems(spec.get("pserver"))
    master = spec.get("master")
    if master is not None:
        if not isinstance(master, dict):
            problems.append("spec.master: must be an object")
        else:
            problems += resources_problems("spec.master.resources", master.get("resources"))
    if is_elastic(job) and not _fault_tolerant(job):
        problems.append(
            "spec.faultTolerant: must be true when spec.trainer.minInstance is below"
            " maxInstance (only a fault-tolerant job survives losing trainers when scaled down)"
        )
    return problems


def _trainer_problems(trainer: object) -> list[str]:
    path = "spec.trainer"
    if not isinstance(trainer, dict):
        return [f"{path}: must be an object"]
    problems = []
    entry = trainer.get("entrypoint")
    if not isinstance(entry, str) or not entry:
        problems.append(f"{path}.entrypoint: must be a non-empty string")
    if trainer.get("workspace") is not None and not isinstance(trainer.get("workspace"), str):
        problems.append(f"{path}.workspace: must be a string")
    problems += int_between(f"{path}.passes", trainer.get("passes"), 1, 2**31 - 1)
    problems += _bounds_problems(path, trainer)
    low, high = trainer.get("minInstance"), trainer.get("maxInstance")
    if not problems and is_int(low) and is_int(high) and low > high:
        problems.append(f"{path}.minInstance: must not exceed {path}.maxInstance")
    return problems + resources_problems(f"{path}.resources", trainer.get("resources"))


def _pserver_problems(pserver: object) -> list[str]:
    path = "spec.pserver"
    if not isinstance(pserver, dict):
        return [f"{path}: must be an object"]
    problems = _bounds_problems(path, pserver)
    low, high = pserver.get("minInstance"), pserver.get("maxInstance")
    if not problems and low != high:
        problems.append(
            f"{path}.maxInstance: must equal {path}.minInstance (pservers do not scale)"
        )
    return problems + resources_problems(f"{path}.resources", pserver.get("resources"))


def _bounds_problems(path: str, block: Obj) -> list[str]:
    problems = []
    for key in ("minInstance", "maxInstance"):
        value = block.get(key)
        if value is None:
            problems.append(f"{path}.{key}: is required")
        else:
            problems += int_between(f"{path}.{key}", value, 1, MAX_REPLICAS)
    return problems


# --- the pods ----------------------------------------------------------------------------


def replicas(job: Obj) -> tuple[Replica, ...]:
    spec = job["spec"]
    port = _int_field(spec, "port", DEFAULT_PORT)
    tolerant = _fault_tolerant(job)
    found: list[Replica] = []
    if tolerant:
        found.append(Replica(MASTER, 1, MASTER_PORT, _master_template(job)))
    pservers = spec["pserver"]["minInstance"]
    found.append(Replica(PSERVER, pservers, port, _template(job, PSERVER)))
    count = trainer_count(job)
    assert count is not None  # validated
    # A fault-tolerant job's master hands a failed trainer's tasks to others,
    # so any failure is worth a retry; otherwise exit 1-127 is final.
    policy = RestartPolicy.ON_FAILURE if tolerant else RestartPolicy.EXIT_CODE
    found.append(Replica(TRAINER, count, port, _template(job, TRAINER), policy))
    return tuple(found)


# EDL's launcher, paddle_k8s, where the image has it (EDL's images did). No
# Paddle image since EDL's carries it, and there the pods failed at once
# ("paddle_k8s": executable file not found); so without it a pod runs what
# paddle_k8s ran in a trainer, ENTRY in TRAINER_PACKAGE, in every role:
# PADDLE_TRAINING_ROLE says which, as one Paddle program serves every role.
LAUNCHER: Final = (
    'if command -v paddle_k8s >/dev/null 2>&1; then exec paddle_k8s "$@"; fi; '
    'cd "${TRAINER_PACKAGE:-.}" && exec sh -c "$ENTRY"'
)
LAUNCHER_NAME: Final = "paddle_k8s"  # $0 of the launcher's shell
ROLE_VARIABLE: Final = "PADDLE_TRAINING_ROLE"


def _command(job: Obj, role: str) -> list[str]:
    return ["sh", "-c", LAUNCHER, LAUNCHER_NAME, *_edl_arguments(job, role)]


def _edl_arguments(job: Obj, role: str) -> list[str]:
    """paddle_k8s's arguments for a role, as EDL's job parser chose them."""
    if role == MASTER:
        return ["start_master"]
    if _fault_tolerant(job):
        return ["start_new_trainer" if role == TRAINER else "start_new_pserver"]
    return ["start_trainer", "v2"] if role == TRAINER else ["start_pserver"]


def _job_ports(job: Obj) -> list[Obj]:
    """EDL's podPorts: port, port+1, ... one per dense and sparse port."""
    spec = job["spec"]
    first = _int_field(spec, "port", DEFAULT_PORT)
    total = _int_field(spec, "portsNum", DEFAULT_PORTS_NUM) + _int_field(
        spec, "portsNumForSparse", DEFAULT_PORTS_NUM_FOR_SPARSE
    )
    return [
        {"name": f"jobport-{p}", "containerPort": p, "protocol": "TCP"}
        for p in range(first, first + total)
    ]


def _pod_template(job: Obj, role: str, containers: list[Obj]) -> Obj:
    name = label_value(str(dig(job, "metadata", "name") or ""))
    volume = {
        "name": TRAINERS_VOLUME,
        "downwardAPI": {
            "items": [
                {
                    "path": "trainers",
                    "fieldRef": {"fieldPath": f"metadata.annotations['{ANNOTATION_TRAINERS}']"},
                }
            ]
        },
    }
    return {
        "metadata": {"labels": {EDL_LABELS[role]: name}},
        "spec": {"containers": containers, "volumes": [volume]},
    }


def _template(job: Obj, role: str) -> Obj:
    block = as_dict(job["spec"].get(role.lower()))
    container: Obj = {
        "name": CONTAINER,
        "image": job["spec"]["image"],
        "command": _command(job, role),
        "ports": _job_ports(job),
    }
    if block.get("resources") is not None:
        container["resources"] = copy.deepcopy(block["resources"])
    return _pod_template(job, role, [container])


def _master_template(job: Obj) -> Obj:
    resources = dig(job, "spec", "master", "resources")
    master: Obj = {
        "name": CONTAINER,
        "image": job["spec"]["image"],
        "command": _command(job, MASTER),
        "ports": [{"name": "master-port", "containerPort": MASTER_PORT, "protocol": "TCP"}],
        "resources": copy.deepcopy(resources if isinstance(resources, dict) else MASTER_RESOURCES),
    }
    # EDL's etcd beside the master: the master keeps its task queue there.
    etcd: Obj = {
        "name": ETCD_CONTAINER,
        # The controller config's images.etcd replaces it (decorate_pod).
        "image": DEFAULT_ETCD_IMAGE,
        "command": list(ETCD_COMMAND),
        "ports": [{"name": "etcd-port", "containerPort": ETCD_PORT, "protocol": "TCP"}],
        "env": [_field_env("POD_IP", "status.podIP")],
        "volumeMounts": [{"name": ETCD_DATA_VOLUME, "mountPath": "/var/lib/etcd"}],
        "securityContext": restricted_security_context(),
    }
    template = _pod_template(job, MASTER, [master, etcd])
    template["spec"]["volumes"].append({"name": ETCD_DATA_VOLUME, "emptyDir": {}})
    return template


def _field_env(name: str, path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def trainer_threads(job: Obj) -> int:
    """PADDLE_INIT_TRAINER_COUNT: the trainer's GPUs, else its whole CPU cores (>= 1)."""
    resources = dig(job, "spec", "trainer", "resources")
    gpus = gpu_count(resources)
    if gpus > 0:
        return gpus
    return max(1, int(cpu_cores(resources).to_integral_value(rounding=ROUND_FLOOR)))


def paddle_env(ctx: JobContext) -> list[tuple[str, str]]:
    """EDL's variables with plain values, in EDL's order (see the module doc)."""
    spec = ctx.job["spec"]
    trainer = spec["trainer"]
    trainers = str(ctx.pod_count(TRAINER))
    workspace = trainer.get("workspace")
    uses_gpu = gpu_count(trainer.get("resources")) > 0
    return [
        ("PADDLE_JOB_NAME", ctx.name),
        ("TRAINERS", trainers),
        ("PSERVERS", str(spec["pserver"]["minInstance"])),
        ("ENTRY", trainer["entrypoint"]),
        ("TRAINER_PACKAGE", workspace if isinstance(workspace, str) else ""),
        ("PADDLE_INIT_PORT", str(_int_field(spec, "port", DEFAULT_PORT))),
        ("PADDLE_INIT_TRAINER_COUNT", str(trainer_threads(ctx.job))),
        ("PADDLE_INIT_PORTS_NUM", str(_int_field(spec, "portsNum", DEFAULT_PORTS_NUM))),
        (
            "PADDLE_INIT_PORTS_NUM_FOR_SPARSE",
            str(_int_field(spec, "portsNumForSparse", DEFAULT_PORTS_NUM_FOR_SPARSE)),
        ),
        ("PADDLE_INIT_NUM_GRADIENT_SERVERS", trainers),
        ("PADDLE_INIT_NUM_PASSES", str(_int_field(trainer, "passes", DEFAULT_PASSES))),
        ("PADDLE_INIT_USE_GPU", "1" if uses_gpu else "0"),
        ("DLK8S_TRAINERS_FILE", TRAINERS_FILE),
    ]


def decorate_pod(ctx: JobContext, slot: Slot, pod: Obj) -> Obj:
    if slot.role == MASTER:
        for etcd in containers_named(pod["spec"], ETCD_CONTAINER):
            etcd["image"] = ctx.config.etcd_image
    values = dict(ctx.remember("paddle_env", lambda: paddle_env(ctx)))
    values[ROLE_VARIABLE] = slot.role
    for container in containers_named(pod["spec"], CONTAINER):
        set_env(container, values)
        # Downward-API values go after the plain ones, as EDL listed them.
        kept = [
            e
            for e in as_list(container.get("env"))
            if not (isinstance(e, dict) and e.get("name") in ("NAMESPACE", "POD_IP"))
        ]
        container["env"] = [
            *kept,
            _field_env("NAMESPACE", "metadata.namespace"),
            _field_env("POD_IP", "status.podIP"),
        ]
        mount = {"name": TRAINERS_VOLUME, "mountPath": TRAINERS_DIR, "readOnly": True}
        container["volumeMounts"] = [*as_list(container.get("volumeMounts")), mount]
    pod["metadata"].setdefault("annotations", {})[ANNOTATION_TRAINERS] = str(ctx.pod_count(TRAINER))
    if slot.role == TRAINER and awaits_admission(ctx):
        gates = as_list(pod["spec"].get("schedulingGates"))
        pod["spec"]["schedulingGates"] = [*gates, {"name": ADMISSION_GATE}]
    return pod


# --- keeping the live count current -------------------------------------------------------


def update_children(ctx: JobContext, owned: Observed) -> list[Action]:
    """Patch the live count into every pod that stays, and lift the
    admission gate once the job may start; an event per change."""
    count = ctx.pod_count(TRAINER)
    value = str(count)
    actions: list[Action] = []
    previous = dig(ctx.job, "status", "trainers")
    if is_int(previous) and previous != count:
        why = scale_reason(ctx.job, count)
        message = f"Scaling trainers from {previous} to {count}: {why}"
        actions.append(Event(EventType.NORMAL, REASON_SCALED, message))
    wanted = {r.role.lower(): r.replicas for r in ctx.replicas}
    # Without the autoscaler nothing would ever admit the job: a gate left
    # from a run with it goes too.
    lift = ctx.config.admission is None or requested_trainers(ctx.job) is not None
    for pod in owned.pods:
        key = replica_key(pod)
        if (
            key is None
            or key[1] >= wanted.get(key[0], 0)  # about to be deleted by scaling down
            or is_terminating(pod)
            or dig(pod, "status", "phase") in _FINISHED
        ):
            continue
        patch = _pod_patch(pod, value, lift)
        if patch is not None:
            actions.append(Patch("v1", "Pod", ctx.namespace, name_of(pod), patch))
    return actions


def _pod_patch(pod: Obj, count: str, lift_gate: bool) -> Obj | None:
    """The live count, and our gate gone, if either is due. A merge patch
    replaces the whole list: gates others added (a webhook's) are kept in it."""
    # The uid makes the patch fail rather than touch a newer pod of that name.
    patch: Obj = {"metadata": {"uid": dig(pod, "metadata", "uid")}}
    if dig(pod, "metadata", "annotations", ANNOTATION_TRAINERS) != count:
        patch["metadata"]["annotations"] = {ANNOTATION_TRAINERS: count}
    gates = as_list(dig(pod, "spec", "schedulingGates"))
    kept = [g for g in gates if not is_admission_gate(g)]
    if lift_gate and len(kept) < len(gates):
        patch["spec"] = {"schedulingGates": kept}
    return patch if len(patch) > 1 or len(patch["metadata"]) > 1 else None


def status_fields(job: Obj, previous: Obj, now: str) -> Obj:
    """status.trainers, lastScaleTime and lastScaleReason.

    A finished job keeps what it had; the first count is not a scaling."""
    carried: dict[str, Any] = {k: previous[k] for k in STATUS_FIELDS if k in previous}
    if previous.get("state") in _FINISHED:
        return carried
    count = trainer_count(job)
    if count is None:
        return carried
    old = previous.get("trainers")
    if is_int(old) and old != count:
        reason = f"Scaled from {old} to {count} trainers: {scale_reason(job, count)}"
        return {"trainers": count, "lastScaleTime": now, "lastScaleReason": reason}
    return carried | {"trainers": count}


PADDLEJOB: Final = Kind(
    name=KIND,
    roles=(MASTER, PSERVER, TRAINER),
    deciding_roles=(TRAINER,),
    container=CONTAINER,
    port_name=PORT_NAME,
    validate=validate,
    replicas=replicas,
    decorate_pod=decorate_pod,
    status_fields=status_fields,
    update_children=update_children,
)
