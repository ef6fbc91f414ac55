"""PaddleJob's pods: built from the spec as EDL's job parser built them,
with each role's pod template (templates) merged in.

Commands, labels, ports, the master's etcd, EDL's variables and the live
trainer count's volume: docs/kinds.md says what each pod gets.
"""

from __future__ import annotations

import copy
from decimal import ROUND_FLOOR
from typing import Final

from dlk8s.job.childnames import label_value
from dlk8s.job.children import containers_named, restricted_security_context
from dlk8s.job.computeresources import cpu_cores, gpu_count
from dlk8s.job.config import DEFAULT_ETCD_IMAGE
from dlk8s.job.env import set_env
from dlk8s.job.jobmodel import JobContext, Replica, Slot
from dlk8s.job.kinds.elastic import add_gate
from dlk8s.job.kinds.elastic import awaits_admission as gated
from dlk8s.job.kinds.paddlejob.launch import (
    ETCD_PORT,
    LAUNCHER,
    LOG_DIR,
    LOG_VOLUME,
    elastic_env,
    ps_env,
    slot_env,
)
from dlk8s.job.kinds.paddlejob.spec import (
    ANNOTATION_TRAINERS,
    CONTAINER,
    DEFAULT_PASSES,
    DEFAULT_PORT,
    DEFAULT_PORTS_NUM,
    DEFAULT_PORTS_NUM_FOR_SPARSE,
    MASTER,
    PSERVER,
    TRAINER,
    fault_tolerant,
    is_elastic,
    trainer_count,
)
from dlk8s.job.kinds.paddlejob.templates import merge_template, role_template
from dlk8s.job.objects import Container, ContainerPort, EnvVar, Obj, as_dict, as_int, as_list, dig
from dlk8s.job.vocabulary import RestartPolicy

MASTER_PORT: Final = 8080
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
TRAINERS_VOLUME: Final = "dlk8s-trainers"
TRAINERS_DIR: Final = "/etc/dlk8s"
TRAINERS_FILE: Final = f"{TRAINERS_DIR}/trainers"


def replicas(job: Obj) -> tuple[Replica, ...]:
    spec = job["spec"]
    port = as_int(spec.get("port"), DEFAULT_PORT)
    tolerant = fault_tolerant(job)
    found: list[Replica] = []
    if tolerant:
        found.append(Replica(MASTER, 1, MASTER_PORT, _master_template(job)))
    # A fault-tolerant job's trainers re-form around a failed one, so any
    # failure is worth a retry. Paddle's parameter-server mode takes no pod
    # back: a recreated trainer waits at Fleet's barrier for peers that have
    # passed it, a recreated pserver has lost its part of the model, and the
    # job would run forever; a failure there is final.
    policy = RestartPolicy.ON_FAILURE if tolerant else RestartPolicy.NEVER
    pservers = spec["pserver"]["minInstance"]
    if pservers:  # none in a collective fault-tolerant job
        found.append(Replica(PSERVER, pservers, port, _template(job, PSERVER), policy))
    count = trainer_count(job)
    assert count is not None  # validated
    found.append(Replica(TRAINER, count, port, _template(job, TRAINER), policy))
    return tuple(found)


LAUNCHER_NAME: Final = "paddle_k8s"  # $0 of the launcher's shell
ROLE_VARIABLE: Final = "PADDLE_TRAINING_ROLE"


def _command(job: Obj, role: str) -> list[str]:
    return ["sh", "-c", LAUNCHER, LAUNCHER_NAME, *_edl_arguments(job, role)]


def _edl_arguments(job: Obj, role: str) -> list[str]:
    """paddle_k8s's arguments for a role, as EDL's job parser chose them."""
    if role == MASTER:
        return ["start_master"]
    if fault_tolerant(job):
        return ["start_new_trainer" if role == TRAINER else "start_new_pserver"]
    return ["start_trainer", "v2"] if role == TRAINER else ["start_pserver"]


def _job_ports(job: Obj) -> list[ContainerPort]:
    """EDL's podPorts: port, port+1, ... one per dense and sparse port."""
    spec = job["spec"]
    first = as_int(spec.get("port"), DEFAULT_PORT)
    total = as_int(spec.get("portsNum"), DEFAULT_PORTS_NUM) + as_int(
        spec.get("portsNumForSparse"), DEFAULT_PORTS_NUM_FOR_SPARSE
    )
    return [
        {"name": f"jobport-{p}", "containerPort": p, "protocol": "TCP"}
        for p in range(first, first + total)
    ]


def _pod_template(
    job: Obj, role: str, containers: list[Container], volumes: tuple[Obj, ...] = ()
) -> Obj:
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
    built: Obj = {
        "metadata": {"labels": {EDL_LABELS[role]: name}},
        "spec": {"containers": containers, "volumes": [volume, *volumes]},
    }
    return merge_template(built, role_template(job, role))


def _template(job: Obj, role: str) -> Obj:
    block = as_dict(job["spec"].get(role.lower()))
    container: Container = {
        "name": CONTAINER,
        "image": job["spec"]["image"],
        "command": _command(job, role),
        "ports": _job_ports(job),
    }
    if block.get("resources") is not None:
        container["resources"] = copy.deepcopy(block["resources"])
    if role != TRAINER or not fault_tolerant(job):
        return _pod_template(job, role, [container])
    # Paddle's elastic launcher keeps its logs there (launch).
    container["volumeMounts"] = [{"name": LOG_VOLUME, "mountPath": LOG_DIR}]
    return _pod_template(job, role, [container], ({"name": LOG_VOLUME, "emptyDir": {}},))


def _master_template(job: Obj) -> Obj:
    resources = dig(job, "spec", "master", "resources")
    master: Container = {
        "name": CONTAINER,
        "image": job["spec"]["image"],
        "command": _command(job, MASTER),
        "ports": [{"name": "master-port", "containerPort": MASTER_PORT, "protocol": "TCP"}],
        "resources": copy.deepcopy(resources if isinstance(resources, dict) else MASTER_RESOURCES),
    }
    # EDL's etcd beside the master: the master keeps its task queue there.
    etcd: Container = {
        "name": ETCD_CONTAINER,
        # The controller config's images.etcd replaces it (decorate_pod).
        "image": DEFAULT_ETCD_IMAGE,
        "command": list(ETCD_COMMAND),
        "ports": [{"name": "etcd-port", "containerPort": ETCD_PORT, "protocol": "TCP"}],
        "env": [_field_env("POD_IP", "status.podIP")],
        "volumeMounts": [{"name": ETCD_DATA_VOLUME, "mountPath": "/var/lib/etcd"}],
        "securityContext": restricted_security_context(),
    }
    return _pod_template(job, MASTER, [master, etcd], ({"name": ETCD_DATA_VOLUME, "emptyDir": {}},))


def _field_env(name: str, path: str) -> EnvVar:
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
    spec = ctx.job.raw["spec"]
    trainer = spec["trainer"]
    trainers = str(ctx.pod_count(TRAINER))
    workspace = trainer.get("workspace")
    uses_gpu = gpu_count(trainer.get("resources")) > 0
    return [
        ("PADDLE_JOB_NAME", ctx.job.name),
        ("TRAINERS", trainers),
        ("PSERVERS", str(spec["pserver"]["minInstance"])),
        ("ENTRY", trainer["entrypoint"]),
        ("TRAINER_PACKAGE", workspace if isinstance(workspace, str) else ""),
        ("PADDLE_INIT_PORT", str(as_int(spec.get("port"), DEFAULT_PORT))),
        ("PADDLE_INIT_TRAINER_COUNT", str(trainer_threads(ctx.job.raw))),
        ("PADDLE_INIT_PORTS_NUM", str(as_int(spec.get("portsNum"), DEFAULT_PORTS_NUM))),
        (
            "PADDLE_INIT_PORTS_NUM_FOR_SPARSE",
            str(as_int(spec.get("portsNumForSparse"), DEFAULT_PORTS_NUM_FOR_SPARSE)),
        ),
        ("PADDLE_INIT_NUM_GRADIENT_SERVERS", trainers),
        ("PADDLE_INIT_NUM_PASSES", str(as_int(trainer.get("passes"), DEFAULT_PASSES))),
        ("PADDLE_INIT_USE_GPU", "1" if uses_gpu else "0"),
        ("DLK8S_TRAINERS_FILE", TRAINERS_FILE),
    ]


def _mode_env(ctx: JobContext) -> list[tuple[str, str]]:
    """What Paddle 3 reads, shared by every pod: its elastic launcher's
    variables for a fault-tolerant job, Fleet's PS variables otherwise."""
    return elastic_env(ctx) if fault_tolerant(ctx.job.raw) else ps_env(ctx)


def decorate_pod(ctx: JobContext, slot: Slot, pod: Obj) -> Obj:
    if slot.role == MASTER:
        for etcd in containers_named(pod["spec"], ETCD_CONTAINER):
            etcd["image"] = ctx.config.etcd_image
    values = dict(ctx.remember("paddle_env", lambda: paddle_env(ctx)))
    values[ROLE_VARIABLE] = slot.role
    values.update(ctx.remember("paddle_mode_env", lambda: _mode_env(ctx)))
    values.update(slot_env(ctx, slot))
    # Downward-API values go after the plain ones, as EDL listed them; a PS
    # job's pserver has its Service's name as POD_IP instead (slot_env).
    fields = {"NAMESPACE": "metadata.namespace", "POD_IP": "status.podIP"}
    fields = {name: path for name, path in fields.items() if name not in values}
    for container in containers_named(pod["spec"], CONTAINER):
        set_env(container, values, fields)
        mount = {"name": TRAINERS_VOLUME, "mountPath": TRAINERS_DIR, "readOnly": True}
        container["volumeMounts"] = [*as_list(container.get("volumeMounts")), mount]
    pod["metadata"].setdefault("annotations", {})[ANNOTATION_TRAINERS] = str(ctx.pod_count(TRAINER))
    if slot.role == TRAINER and awaits_admission(ctx):
        add_gate(pod)
    return pod


def awaits_admission(ctx: JobContext) -> bool:
    """New trainers of this job are to wait behind elastic.ADMISSION_GATE."""
    return gated(ctx, is_elastic(ctx.job.raw) and fault_tolerant(ctx.job.raw))
