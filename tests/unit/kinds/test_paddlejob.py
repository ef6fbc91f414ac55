"""PaddleJob: EDL's example job, its variables, scaling, outcome and validation.

Expected values are written from EDL's job parser and the documented
choices in dlk8s.job.kinds.paddlejob, never copied from an output.
"""

from __future__ import annotations

import copy
import random
from dataclasses import replace
from typing import Any

import pytest

from dlk8s.job.actions import Create, Event, Patch
from dlk8s.job.config import Admission, parse_config
from dlk8s.job.kinds.paddlejob.spec import (
    TrainerDecision,
    scale_reason,
    trainer_count,
)
from dlk8s.job.reconcile import Result

from ..support.paddle import (
    CONFIG,
    EDL_EXAMPLE_ENV,
    ELASTIC_LAUNCHER_ENV,
    PaddleWorld,
    edl_example,
    launched,
)
from ..support.worlds import World, creates, deletes, events, started


def running(job: dict[str, Any] | None = None) -> PaddleWorld:
    return started(PaddleWorld(job or edl_example(), config=CONFIG))


def env(pod: dict[str, Any]) -> dict[str, Any]:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "paddle")
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def created_pods(result: Result) -> dict[str, dict[str, Any]]:
    return {
        a.obj["metadata"]["name"]: a.obj
        for a in result.actions
        if isinstance(a, Create) and a.obj["kind"] == "Pod"
    }


def trainers(world: World) -> list[str]:
    return [p for p in world.pods() if "-trainer-" in p]


# --- EDL's example ----------------------------------------------------------------


def test_edl_example_makes_a_master_two_pservers_and_min_trainers() -> None:
    result = PaddleWorld(edl_example(), config=CONFIG).reconcile()
    pods = [
        "example-master-0",
        "example-pserver-0",
        "example-pserver-1",
        "example-trainer-0",
        "example-trainer-1",
    ]
    assert creates(result, "Pod") == pods
    assert creates(result, "Service") == []  # each once its pod has an address
    assert result.status["trainers"] == 2
    statuses = [s["replicaType"] for s in result.status["replicaStatuses"]]
    assert statuses == ["MASTER", "PSERVER", "TRAINER"]


def test_edl_example_trainer_variables() -> None:
    pods = created_pods(PaddleWorld(edl_example(), config=CONFIG).reconcile())
    downward = {
        "NAMESPACE": {"fieldRef": {"fieldPath": "metadata.namespace"}},
        "POD_IP": {"fieldRef": {"fieldPath": "status.podIP"}},
    }
    expected = {**EDL_EXAMPLE_ENV, **ELASTIC_LAUNCHER_ENV, **downward}
    roles = {"trainer": "TRAINER", "pserver": "PSERVER", "master": "MASTER"}
    for name in ("example-trainer-0", "example-trainer-1", "example-pserver-0", "example-master-0"):
        role = roles[name.split("-")[1]]
        assert env(pods[name]) == expected | {"PADDLE_TRAINING_ROLE": role}, name


def test_edl_example_pods_look_like_edls() -> None:
    pods = created_pods(PaddleWorld(edl_example(), config=CONFIG).reconcile())
    trainer = pods["example-trainer-0"]
    container = trainer["spec"]["containers"][0]
    assert container["name"] == "paddle"
    assert container["image"] == "yancey1989/edl-tutorial"
    assert container["command"] == launched("start_new_trainer")
    assert [p["containerPort"] for p in container["ports"]] == [7164, 7165]
    assert container["resources"] == {
        "limits": {"cpu": "200m", "memory": "200Mi"},
        "requests": {"cpu": "200m", "memory": "200Mi"},
    }
    assert trainer["metadata"]["labels"]["paddle-job"] == "example"
    assert trainer["spec"]["restartPolicy"] == "Never"

    pserver = pods["example-pserver-1"]
    assert pserver["spec"]["containers"][0]["command"] == launched("start_new_pserver")
    assert pserver["spec"]["containers"][0]["resources"] == {
        "limits": {"cpu": "800m", "memory": "1Gi"},
        "requests": {"cpu": "500m", "memory": "600Mi"},
    }
    assert pserver["metadata"]["labels"]["paddle-job-pserver"] == "example"

    master = pods["example-master-0"]
    names = [c["name"] for c in master["spec"]["containers"]]
    assert names == ["paddle", "etcd"]
    assert master["spec"]["containers"][1]["image"] == "quay.io/coreos/etcd:v3.2.1"
    assert master["spec"]["containers"][0]["command"] == launched("start_master")
    # EDL's master resources when the job names none.
    assert master["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "500Mi"},
        "limits": {"cpu": "2", "memory": "1Gi"},
    }
    assert master["metadata"]["labels"]["paddle-job-master"] == "example"


def test_the_masters_etcd_image_is_the_controller_configs() -> None:
    mirrored = parse_config({"images": {"etcd": "mirror.local/etcd:3.4"}})
    pods = created_pods(PaddleWorld(edl_example(), config=mirrored).reconcile())
    [etcd] = [c for c in pods["example-master-0"]["spec"]["containers"] if c["name"] == "etcd"]
    assert etcd["image"] == "mirror.local/etcd:3.4"


def test_a_job_that_is_not_fault_tolerant_has_no_master() -> None:
    fixed = {"entrypoint": "python train.py", "minInstance": 3, "maxInstance": 3}
    result = PaddleWorld(edl_example(faultTolerant=False, trainer=fixed), config=CONFIG).reconcile()
    assert creates(result, "Pod") == [
        "example-pserver-0",
        "example-pserver-1",
        "example-trainer-0",
        "example-trainer-1",
        "example-trainer-2",
    ]
    pods = created_pods(result)
    assert pods["example-trainer-0"]["spec"]["containers"][0]["command"] == launched(
        "start_trainer", "v2"
    )
    assert pods["example-pserver-0"]["spec"]["containers"][0]["command"] == launched(
        "start_pserver"
    )
    assert env(pods["example-trainer-2"])["TRAINER_PACKAGE"] == ""


def test_a_job_that_is_not_fault_tolerant_gets_fleets_parameter_server_variables() -> None:
    fixed = {"entrypoint": "python train.py", "minInstance": 2, "maxInstance": 2}
    job = edl_example(faultTolerant=False, trainer=fixed)
    pods = created_pods(PaddleWorld(job, config=CONFIG).reconcile())
    shared = {
        "PADDLE_PSERVERS_IP_PORT_LIST": (
            "example-pserver-0.ns.svc:7164,example-pserver-1.ns.svc:7164"
        ),
        "PADDLE_TRAINER_ENDPOINTS": "example-trainer-0.ns.svc:7164,example-trainer-1.ns.svc:7164",
        "PADDLE_TRAINERS_NUM": "2",
        "PADDLE_PORT": "7164",
        # Gloo's barriers meet at an HTTP store pserver 0 serves.
        "PADDLE_WITH_GLOO": "1",
        "PADDLE_GLOO_RENDEZVOUS": "3",
        "PADDLE_GLOO_HTTP_ENDPOINT": "example-pserver-0.ns.svc:6767",
    }
    own = {
        "example-trainer-1": {"TRAINING_ROLE": "TRAINER", "PADDLE_TRAINER_ID": "1"},
        # Fleet finds a pserver's index by POD_IP:PADDLE_PORT in the list.
        "example-pserver-1": {"TRAINING_ROLE": "PSERVER", "POD_IP": "example-pserver-1.ns.svc"},
    }
    for name, values in own.items():
        found = env(pods[name])
        assert {k: found.get(k) for k in shared} == shared, name
        assert {k: found.get(k) for k in values} == values, name
        assert found["PADDLE_ROLE"] == values["TRAINING_ROLE"]
        assert "PADDLE_MASTER" not in found
    assert env(pods["example-trainer-1"])["POD_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert [e["name"] for e in pods["example-pserver-1"]["spec"]["containers"][0]["env"]].count(
        "POD_IP"
    ) == 1


def test_a_fault_tolerant_job_may_have_no_pservers_and_its_trainers_keep_paddles_logs() -> None:
    result = PaddleWorld(
        edl_example(pserver={"minInstance": 0, "maxInstance": 0}), config=CONFIG
    ).reconcile()
    assert creates(result, "Pod") == ["example-master-0", "example-trainer-0", "example-trainer-1"]
    trainer = created_pods(result)["example-trainer-0"]
    [log] = [v for v in trainer["spec"]["volumes"] if v["name"] == "dlk8s-paddle-log"]
    assert log == {"name": "dlk8s-paddle-log", "emptyDir": {}}
    mounts = {m["name"]: m["mountPath"] for m in trainer["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["dlk8s-paddle-log"] == env(trainer)["PADDLE_LOG_DIR"] == "/var/log/dlk8s-paddle"


def test_a_job_that_is_not_fault_tolerant_needs_pservers() -> None:
    fixed = {"entrypoint": "python train.py", "minInstance": 2, "maxInstance": 2}
    none = {"minInstance": 0, "maxInstance": 0}
    job = edl_example(faultTolerant=False, trainer=fixed, pserver=none)
    assert invalid_reason(job) == ("Failed", "InvalidSpec")


def test_gpu_trainers_use_gpus_and_count_them() -> None:
    trainer = edl_example()["spec"]["trainer"] | {
        "resources": {"limits": {"nvidia.com/gpu": 2, "cpu": "4"}},
    }
    pods = created_pods(PaddleWorld(edl_example(trainer=trainer), config=CONFIG).reconcile())
    assert env(pods["example-trainer-0"])["PADDLE_INIT_USE_GPU"] == "1"
    assert env(pods["example-trainer-0"])["PADDLE_INIT_TRAINER_COUNT"] == "2"
    cpu_only = edl_example()["spec"]["trainer"] | {"resources": {"requests": {"cpu": "2500m"}}}
    pods = created_pods(PaddleWorld(edl_example(trainer=cpu_only), config=CONFIG).reconcile())
    assert env(pods["example-trainer-0"])["PADDLE_INIT_TRAINER_COUNT"] == "2"


def test_every_pod_sees_the_live_count_through_a_downward_api_file() -> None:
    pods = created_pods(PaddleWorld(edl_example(), config=CONFIG).reconcile())
    for pod in pods.values():
        assert pod["metadata"]["annotations"]["dlk8s.io/trainers"] == "2"
        volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "dlk8s-trainers")
        item = volume["downwardAPI"]["items"][0]
        assert item["path"] == "trainers"
        assert item["fieldRef"]["fieldPath"] == "metadata.annotations['dlk8s.io/trainers']"
        mounts = {m["name"]: m["mountPath"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
        assert mounts["dlk8s-trainers"] == "/etc/dlk8s"


# --- scaling ----------------------------------------------------------------------


def test_scaling_up_adds_the_next_indices_and_updates_every_pod_in_place() -> None:
    world = running()
    uids = {name: world.pod(name)["metadata"]["uid"] for name in world.pods()}
    world.scale(4, "4: room on the nodes")
    result = world.step()
    assert creates(result, "Pod") == ["example-trainer-2", "example-trainer-3"]
    assert deletes(result) == []
    patched = sorted(a.name for a in result.actions if isinstance(a, Patch))
    assert patched == sorted(uids)  # every existing pod, none recreated
    assert ("Normal", "TrainersScaled") in events(result)
    assert result.status["trainers"] == 4
    assert result.status["lastScaleReason"] == "Scaled from 2 to 4 trainers: room on the nodes"
    world.run()
    world.settle()
    for name, uid in uids.items():
        assert world.pod(name)["metadata"]["uid"] == uid
        assert world.pod(name)["metadata"]["annotations"]["dlk8s.io/trainers"] == "4"
    # New trainers start with the count they were created at.
    assert env(world.pod("example-trainer-3"))["TRAINERS"] == "4"
    assert env(world.pod("example-trainer-0"))["TRAINERS"] == "2"


def test_scaling_down_removes_the_highest_indices_and_is_no_restart() -> None:
    world = running()
    world.scale(6)
    world.settle()
    world.run()
    world.settle()
    assert trainers(world) == [f"example-trainer-{i}" for i in range(6)]
    world.scale(3)
    result = world.step()
    assert deletes(result, "Pod") == ["example-trainer-3", "example-trainer-4", "example-trainer-5"]
    assert deletes(result, "Service") == [
        "example-trainer-3",
        "example-trainer-4",
        "example-trainer-5",
    ]
    world.settle()
    assert trainers(world) == ["example-trainer-0", "example-trainer-1", "example-trainer-2"]
    assert world.job["status"]["restartCount"] == 0
    assert world.job["status"]["trainers"] == 3
    assert world.job["status"]["phase"] == "Running"
    assert all(r[1] != "Recreating" for r in events(world.reconcile()))


def test_the_count_stays_within_min_and_max_and_pservers_never_scale() -> None:
    world = running()
    for asked, expected in (("100", 6), ("1", 2), ("0", 2), ("lots", 2), ("-3", 2), ("5", 5)):
        world.scale(asked)
        world.settle()
        world.run()
        world.settle()
        assert len(trainers(world)) == expected, asked
        assert world.job["status"]["trainers"] == expected
        assert [p for p in world.pods() if "-pserver-" in p] == [
            "example-pserver-0",
            "example-pserver-1",
        ]


def test_a_stale_reason_is_not_reported() -> None:
    world = running()
    world.scale(6, "4: room for four")  # the reason explains another count
    result = world.step()
    assert "room for four" not in result.status["lastScaleReason"]


# --- outcome ------------------------------------------------------------------------


def test_the_job_succeeds_when_every_trainer_has_exited_zero() -> None:
    world = running()
    world.exit("example-trainer-0", 0)
    world.settle()
    assert world.job["status"]["state"] == "Running"
    assert world.job["status"]["phase"] == "Running"
    world.exit("example-trainer-1", 0)
    world.settle()
    assert world.job["status"]["state"] == "Succeeded"
    world.past_cleanup_grace()
    world.settle()
    # cleanPodPolicy Running: master and pservers are stopped.
    assert [p for p in world.pods() if "trainer" not in p] == []


def test_a_failed_trainer_fails_a_job_that_is_not_fault_tolerant() -> None:
    fixed = edl_example()["spec"]["trainer"] | {"minInstance": 2, "maxInstance": 2}
    world = running(edl_example(faultTolerant=False, trainer=fixed))
    world.exit("example-trainer-1", 1)
    world.settle()
    assert world.job["status"]["state"] == "Failed"


@pytest.mark.parametrize("pod", ["example-trainer-1", "example-pserver-0"])
def test_in_parameter_server_mode_any_failure_is_final(pod: str) -> None:
    """Paddle's PS mode takes no pod back (a recreated trainer would wait at
    Fleet's barrier forever): a pod killed by a signal, which other jobs
    retry, fails the job, and nothing is recreated."""
    fixed = edl_example()["spec"]["trainer"] | {"minInstance": 2, "maxInstance": 2}
    world = running(edl_example(faultTolerant=False, trainer=fixed))
    world.exit(pod, 139)
    result = world.step()
    assert world.job["status"]["state"] == "Failed"
    assert creates(result, "Pod") == []
    failed = next(c for c in world.job["status"]["conditions"] if c["type"] == "Failed")
    assert f"(pod {pod}) failed" in failed["message"]


def test_a_failed_trainer_of_a_fault_tolerant_job_is_recreated() -> None:
    world = running()
    world.exit("example-trainer-1", 1)
    world.step()
    assert world.job["status"]["state"] == "Running"
    world.later(60)  # past the restart back-off
    result = world.step()
    assert world.job["status"]["state"] == "Running"
    assert deletes(result, "Pod") == ["example-trainer-1"]
    assert creates(world.step(), "Pod") == ["example-trainer-1"]


# --- validation and malformed input ----------------------------------------------------


def invalid_reason(job: dict[str, Any]) -> tuple[str, str]:
    status = PaddleWorld(job, config=CONFIG).reconcile().status
    return status["state"], status.get("reason", "")


def test_an_elastic_job_must_be_fault_tolerant() -> None:
    assert invalid_reason(edl_example(faultTolerant=False)) == ("Failed", "InvalidSpec")


def test_invalid_specs_fail_with_invalid_spec() -> None:
    cases = [
        {"pserver": {"minInstance": 2, "maxInstance": 3}},
        {"trainer": {"entrypoint": "x", "minInstance": 4, "maxInstance": 2}},
        {"trainer": {"minInstance": 1, "maxInstance": 2}},
        {"image": ""},
        {"port": 65535, "portsNum": 2},
        {"portsNum": 0},
        {
            "trainer": edl_example()["spec"]["trainer"]
            | {"resources": {"requests": {"cpu": "200x"}}}
        },
    ]
    for spec in cases:
        assert invalid_reason(edl_example(**spec)) == ("Failed", "InvalidSpec"), spec
    assert invalid_reason(edl_example())[0] == "Running"


JUNK: list[Any] = [None, 0, -1, True, "x", "", [], {}, [None], {"a": 1}, 2.5, "7"]


def _mutate(job: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    job = copy.deepcopy(job)
    for _ in range(rng.randint(1, 3)):
        target: Any = job
        while True:
            if not isinstance(target, dict) or not target:
                break
            key = rng.choice(list(target))
            if isinstance(target[key], dict) and rng.random() < 0.75:
                target = target[key]
                continue
            target[key] = rng.choice(JUNK)
            break
    return job


def test_malformed_jobs_and_pods_never_raise() -> None:
    rng = random.Random(11)
    base = running()
    for _ in range(600):
        job = _mutate(base.job, rng)
        pods = [_mutate(base.pod(p), rng) for p in base.pods()]
        world = PaddleWorld(job, config=CONFIG)
        for pod in pods:
            name = (
                pod.get("metadata", {}).get("name")
                if isinstance(pod.get("metadata"), dict)
                else None
            )
            world.children[("Pod", str(name))] = pod
        result = world.reconcile()
        internal = [
            a for a in result.actions if isinstance(a, Event) and a.reason == "InternalError"
        ]
        assert internal == [], internal


def test_a_trainer_decision_travels_on_the_job_and_its_reason_only_with_its_count() -> None:
    decision = TrainerDecision(4, "room for 2 more trainers of 1 GPU")
    job = {"metadata": {"annotations": decision.annotations()}}
    assert trainer_count({**edl_example(), **job}) == 4
    assert scale_reason(job, 4) == "room for 2 more trainers of 1 GPU"
    # A user who sets another count by hand does not get the autoscaler's reason.
    job["metadata"]["annotations"]["dlk8s.io/trainers"] = "3"
    assert scale_reason(job, 3) == "set by the dlk8s.io/trainers annotation"
    long = TrainerDecision(2, "x" * 5000).annotations()["dlk8s.io/trainers-reason"]
    assert len(long) == 1000


# --- the admission gate -----------------------------------------------------------------


def gates(pod: dict[str, Any]) -> list[str]:
    return [g["name"] for g in pod["spec"].get("schedulingGates", [])]


def test_trainers_wait_behind_the_gate_only_while_the_autoscaler_keeps_nodes() -> None:
    admission = Admission()
    world = PaddleWorld(edl_example(), config=replace(CONFIG, admission=admission))
    assert [gates(p) for n, p in created_pods(world.reconcile()).items()] == [[]] * 5
    admission.closed = True
    world.settle()
    assert {n: gates(world.pod(n)) for n in trainers(world)} == {
        "example-trainer-0": ["dlk8s.io/admission"],
        "example-trainer-1": ["dlk8s.io/admission"],
    }
    # A gate someone else added (an admission webhook) is not ours to lift.
    world.pod("example-trainer-1")["spec"]["schedulingGates"].insert(0, {"name": "other"})
    world.settle()
    assert gates(world.pod("example-trainer-0")) == ["dlk8s.io/admission"]
    world.autoscale(2, "2: admitted at 2 trainers")
    world.settle()
    assert {n: gates(world.pod(n)) for n in trainers(world)} == {
        "example-trainer-0": [],
        "example-trainer-1": ["other"],
    }


def test_a_count_written_by_anyone_but_the_autoscaler_admits_nothing() -> None:
    admission = Admission()
    admission.closed = True
    world = PaddleWorld(edl_example(), config=replace(CONFIG, admission=admission))
    world.settle()
    # A user's count, even one that looks like the autoscaler's, lifts no
    # gate; nor does it open the way for trainers created after it.
    world.scale(3, "3: admitted at 3 trainers")
    world.settle()
    assert {n: gates(world.pod(n)) for n in trainers(world)} == {
        f"example-trainer-{i}": ["dlk8s.io/admission"] for i in range(3)
    }
    world.autoscale(3, "3: admitted at 3 trainers")
    world.settle()
    assert [gates(world.pod(n)) for n in trainers(world)] == [[], [], []]


def test_without_the_autoscaler_a_gate_left_from_a_run_with_it_is_lifted() -> None:
    closed = Admission()
    closed.closed = True
    world = PaddleWorld(edl_example(), config=replace(CONFIG, admission=closed))
    world.settle()
    assert gates(world.pod("example-trainer-0")) == ["dlk8s.io/admission"]
    world.config = CONFIG  # restarted with --no-autoscaler
    world.settle()
    assert [gates(world.pod(n)) for n in trainers(world)] == [[], []]
