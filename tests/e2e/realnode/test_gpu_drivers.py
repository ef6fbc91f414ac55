"""GPU driver config per cloud, proven in running containers on the real node.

The chart's values reach a container: values -> the chart's controller
ConfigMap -> the operator (a local process reading that ConfigMap, as
OperatorProcess does) -> the pod it builds -> what the container sees. For
`cloud=gke`, `cloud=azure` and a custom `config.accelerators`
(values/custom-gpu.yaml), a TFJob's MASTER pod runs four containers, each
printing its environment and what lies at every driver path:

- `tensorflow` asks for one `nvidia.com/gpu` (today's resource),
- `legacy` for one `alpha.kubernetes.io/nvidia-gpu` (the seeds' resource,
  the one the presets give hostPath mounts),
- `zero` for `nvidia.com/gpu: 0` (how templated charts say "no GPU"),
- `none` for nothing; it mounts the template's own volume `lib`, whose name
  the azure preset's legacy entry uses too.

The node offers both resources (an extended resource patched into its
status: no device plugin) and holds a fake driver, plain files under the
node's own folder. The presets' host paths are pointed there by values, as
a user with drivers elsewhere would do; everything else (mount paths,
variables) is the preset's as values.yaml ships it, or values/custom-gpu.yaml's.
The expectations are computed from those values with the semantics the
chart documents; a few literal anchors keep them from passing vacuously.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from dlk8s_dev.localcluster import REPO_ROOT, LocalCluster
from dlk8s_dev.localdeploy import LOCAL_VALUES, OperatorProcess, install_chart
from dlk8s_dev.realnode import RealNode

from ..helpers import get_json, temporary_namespace, wait_for_phase, wait_until

GPU = "nvidia.com/gpu"
LEGACY = "alpha.kubernetes.io/nvidia-gpu"
RELEASE = "dlk8s-gpu"
RELEASE_NAMESPACE = "dlk8s-gpu"
IMAGE = "localhost/dlk8s/base:local"
JOB = "gpu-probe"
POD = f"{JOB}-master-0"
# Where GKE's device plugin would mount the driver. Nothing plays that plugin
# here, and the gke preset adds no volume for nvidia.com/gpu: nothing may be
# mounted there.
DEVICE_PLUGIN_PATH = "/usr/local/nvidia"
CHART_VALUES = yaml.safe_load((REPO_ROOT / "charts/dlk8s/values.yaml").read_text())
CUSTOM_VALUES = yaml.safe_load((REPO_ROOT / "values/custom-gpu.yaml").read_text())
CASES = ("gke", "azure", "custom")
# container -> the resources it limits
ASKS: dict[str, dict[str, int]] = {"tensorflow": {GPU: 1}, "legacy": {LEGACY: 1}, "zero": {GPU: 0}}
CONTAINERS = ("tensorflow", "legacy", "zero", "none")
# Literal facts per case, so that a preset emptied by mistake cannot pass:
# (container, variable or mount path, the variable's value or a file that
# must be listed there).
ANCHORS = {
    "gke": [
        ("tensorflow", "LD_LIBRARY_PATH", "/usr/local/nvidia/lib64"),
        ("legacy", "/usr/local/nvidia/lib64", "libcuda.so.1"),
        ("legacy", "/usr/local/bin/nvidia", "nvidia-smi"),
    ],
    "azure": [
        ("legacy", "/usr/local/nvidia/lib64", "libcuda.so.1"),
        ("legacy", "/usr/local/nvidia/bin", "nvidia-smi"),
        ("legacy", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", ""),
    ],
    "custom": [
        ("tensorflow", "LD_LIBRARY_PATH", "/usr/local/nvidia/lib64"),
        ("tensorflow", "NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
        ("tensorflow", "/usr/local/nvidia", "lib64/libcuda.so.1"),
        ("legacy", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", ""),
    ],
}

# What a container prints: its environment, and for each path the files
# under it ({relative path: content}; "" names the path itself when it is a
# file) and its mount options if it is a mount point. os.access asks the
# kernel whether root could write there, without writing anything.
PROBE = r"""
import json, os, sys

def files(path):
    if os.path.isfile(path):
        return {"": open(path).read()}
    if not os.path.isdir(path):
        return None
    found = {}
    for top, _, names in os.walk(path):
        for name in names:
            full = os.path.join(top, name)
            found[os.path.relpath(full, path)] = open(full).read()
    return found

mounts = {}
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    mounts[fields[4]] = fields[5].split(",")
paths = json.loads(sys.argv[1])
print(json.dumps({
    "env": dict(os.environ),
    "files": {p: files(p) for p in paths},
    "mounts": {p: mounts.get(p) for p in paths},
    "writable": {p: os.access(p, os.W_OK) for p in paths if os.path.exists(p)},
}))
"""


def host_files(path: Path) -> dict[str, str] | None:
    """What PROBE prints for a path, read on the host."""
    if path.is_file():
        return {"": path.read_text()}
    if not path.is_dir():
        return None
    return {str(f.relative_to(path)): f.read_text() for f in path.rglob("*") if f.is_file()}


# -- the values -----------------------------------------------------------------------


def redirected(accelerators: dict[str, Any], root: Path) -> dict[str, Any]:
    """`accelerators` with every hostPath moved under ``root`` (same path below it)."""
    moved = json.loads(json.dumps(accelerators))
    for entry in moved.values():
        for volume in (entry or {}).get("volumes") or []:
            volume["hostPath"] = f"{root}{volume['hostPath']}"
    return moved


def case_values(case: str, root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the values file for the case, the accelerators the operator should get)."""
    if case == "custom":
        accelerators = redirected(CUSTOM_VALUES["config"]["accelerators"], root)
        return {"cloud": "", "config": {"accelerators": accelerators}}, accelerators
    preset = CHART_VALUES["cloudPresets"][case]["accelerators"]
    accelerators = redirected(preset, root)
    # Only the entries with host paths need new values; the rest stay as shipped.
    overrides = {r: e for r, e in accelerators.items() if (e or {}).get("volumes")}
    values = {"cloud": case, "cloudPresets": {case: {"accelerators": overrides}}}
    return values, accelerators


def all_host_paths(root: Path) -> list[str]:
    paths = []
    for case in CASES:
        for entry in case_values(case, root)[1].values():
            paths += [v["hostPath"] for v in (entry or {}).get("volumes") or []]
    return paths


def mount_paths(root: Path) -> list[str]:
    found = {DEVICE_PLUGIN_PATH}
    for case in CASES:
        for entry in case_values(case, root)[1].values():
            found |= {v["mountPath"] for v in (entry or {}).get("volumes") or []}
    return sorted(found)


def expected_for(
    accelerators: dict[str, Any], asks: dict[str, int]
) -> tuple[dict[str, str], dict[str, str]]:
    """(variables, {mountPath: hostPath}) a container asking for ``asks`` gets:
    resources asked for more than zero, first entry wins per name and path."""
    env: dict[str, str] = {}
    mounts: dict[str, str] = {}
    for resource, count in asks.items():
        entry = accelerators.get(resource) or {}
        if count <= 0:
            continue
        for var in entry.get("envVars") or []:
            env.setdefault(var["name"], var["value"])
        for volume in entry.get("volumes") or []:
            mounts.setdefault(volume["mountPath"], volume["hostPath"])
    return env, mounts


# -- the node's fake driver -------------------------------------------------------------


def make_fake_driver(root: Path) -> None:
    """Plain files at every host path the cases use. A path whose name holds
    ".so" is a file (the presets mount libcuda.so.1 alone); any other is a
    folder with a library and a tool. Each file names where it lies, so a
    container shows which host path it got."""
    paths = sorted(set(all_host_paths(root)))
    for path in (Path(p) for p in paths if ".so" not in PurePosixPath(p).name):
        path.mkdir(parents=True, exist_ok=True)
        for name in ("libcuda.so.1", "nvidia-smi"):
            (path / name).write_text(f"fake {name} in {path}\n")
    for path in (Path(p) for p in paths if ".so" in PurePosixPath(p).name):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"fake {path.name} at {path}\n")


# -- fixtures -----------------------------------------------------------------------------


def node_of(cluster: LocalCluster) -> RealNode:
    assert cluster.node is not None
    return cluster.node


@pytest.fixture(scope="module")
def driver_root(real_cluster: LocalCluster) -> Iterator[Path]:
    """The node offers 4 of each GPU resource and holds the fake driver."""
    node = node_of(real_cluster)
    node.advertise(real_cluster, {GPU: "4", LEGACY: "4"})
    root = node.host_dir("gpu-driver")
    make_fake_driver(root)
    try:
        yield root
    finally:
        real_cluster.helm("uninstall", RELEASE, "-n", RELEASE_NAMESPACE, check=False)
        real_cluster.kubectl("delete", "namespace", RELEASE_NAMESPACE, "--wait=false",
                             "--ignore-not-found")  # fmt: skip
        node.withdraw(real_cluster, [GPU, LEGACY])


def probe_job(paths: list[str]) -> dict[str, Any]:
    def container(name: str) -> dict[str, Any]:
        found: dict[str, Any] = {
            "name": name,
            "image": IMAGE,
            "imagePullPolicy": "Never",
            "command": ["python3", "-c", PROBE, json.dumps(paths)],
        }
        if name in ASKS:
            found["resources"] = {"limits": ASKS[name]}
        if name == "none":
            found["volumeMounts"] = [{"name": "lib", "mountPath": "/scratch"}]
        return found

    return {
        "apiVersion": "dlk8s.io/v1alpha1",
        "kind": "TFJob",
        "metadata": {"name": JOB},
        "spec": {
            # The pod stays after the job ends, for its logs.
            "runPolicy": {"cleanPodPolicy": "None"},
            "replicaSpecs": [
                {
                    "replicas": 1,
                    "tfReplicaType": "MASTER",
                    "template": {
                        "spec": {
                            "terminationGracePeriodSeconds": 1,
                            "containers": [container(n) for n in CONTAINERS],
                            "volumes": [{"name": "lib", "emptyDir": {}}],
                        }
                    },
                }
            ],
        },
    }


def run_probe(cluster: LocalCluster, namespace: str, paths: list[str]) -> dict[str, Any]:
    """Each container's report, once the MASTER pod has succeeded."""
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(probe_job(paths)))

    def done() -> str:
        pods = get_json(cluster, "pods", "-n", namespace)["items"]
        return next((p["status"].get("phase") for p in pods if p["metadata"]["name"] == POD), "")

    phase = wait_until(lambda: done() in ("Succeeded", "Failed") and done(), 90, f"{POD} to end")
    logs = {
        c: cluster.kubectl("logs", POD, "-n", namespace, "-c", c, check=False).stdout
        for c in CONTAINERS
    }
    assert phase == "Succeeded", f"{POD} {phase}: {logs}"
    return {c: json.loads(out.strip().splitlines()[-1]) for c, out in logs.items()}


@contextmanager
def operator_for(cluster: LocalCluster, case: str, root: Path) -> Iterator[str]:
    """Install the chart with the case's values and run the operator with its
    config; a namespace whose pods go to the real node."""
    values, _ = case_values(case, root)
    values_file = cluster.workdir / "gpu-drivers" / f"{case}.yaml"
    values_file.parent.mkdir(exist_ok=True)
    values_file.write_text(yaml.safe_dump(values))
    install = install_chart(
        cluster, RELEASE, RELEASE_NAMESPACE, sets=(), values=(LOCAL_VALUES, values_file)
    )
    operator = OperatorProcess(install, name=f"gpu-{case}").start()
    try:
        with temporary_namespace(cluster) as namespace:
            node_of(cluster).real_namespace(cluster, namespace)
            yield namespace
    except BaseException:
        print(f"operator log (tail):\n{operator.tail(4000)}")
        raise
    finally:
        operator.stop()


def probe_with(cluster: LocalCluster, case: str, root: Path) -> dict[str, Any]:
    """The probe job on the real node under the case's values; the
    containers' reports."""
    with operator_for(cluster, case, root) as namespace:
        return run_probe(cluster, namespace, mount_paths(root))


# -- the tests --------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_gpu_containers_see_the_driver_and_the_others_see_nothing(
    real_cluster: LocalCluster, driver_root: Path, case: str
) -> None:
    began = time.monotonic()
    seen = probe_with(real_cluster, case, driver_root)
    _, accelerators = case_values(case, driver_root)
    gpu_vars = {
        var["name"] for entry in accelerators.values() for var in (entry or {}).get("envVars") or []
    }
    # Every mismatch of every container at once: one run shows the whole picture.
    problems = []
    for name in CONTAINERS:
        env, mounts = expected_for(accelerators, ASKS.get(name, {}))
        problems += container_problems(name, seen[name], env, mounts, gpu_vars)
    problems += anchor_problems(ANCHORS[case], seen)
    assert not problems, f"cloud {case!r}:\n" + "\n".join(problems)
    print(f"[gpu-drivers] {case}: {time.monotonic() - began:.1f}s")


def test_the_gpu_example_trains_with_the_driver_it_was_given(
    real_cluster: LocalCluster, driver_root: Path
) -> None:
    """examples/tfjob-gpu as it is, under the custom accelerators: its MASTER
    asks for nvidia.com/gpu, gets the driver, and trains (on the CPU: the
    node advertises GPUs it does not have)."""
    _, accelerators = case_values("custom", driver_root)
    entry = accelerators[GPU]
    [mount] = entry["volumes"]
    example = REPO_ROOT / "examples" / "local" / "tfjob-gpu"  # with the local runtime image
    pod = "tfjob-gpu-master-0"
    with operator_for(real_cluster, "custom", driver_root) as namespace:
        real_cluster.kubectl("apply", "-k", str(example), "-n", namespace)
        status = wait_for_phase(real_cluster, namespace, "TFJob", "tfjob-gpu", "Done", 180)
        out = real_cluster.kubectl("logs", pod, "-n", namespace, "-c", "tensorflow").stdout
        master = get_json(real_cluster, "pod", pod, "-n", namespace)
    assert status["state"] == "Succeeded", status
    assert master["spec"]["nodeName"] == node_of(real_cluster).name
    assert master["spec"]["containers"][0]["resources"]["limits"][GPU] == "1"
    for var in entry["envVars"]:
        assert f"gpu-example: env {var['name']}={var['value']}\n" in out, out
    driver = host_files(Path(mount["hostPath"]))
    assert driver, mount
    assert f"gpu-example: {mount['mountPath']}: {len(driver)} file(s)" in out, out
    assert "lib64/libcuda.so.1" in out, out
    assert "sees 0 GPU(s); training on /CPU:0" in out, out
    assert re.search(r"^gpu-example: done: w 3\.\d+ b -[12]\.\d+ on /CPU:0", out, re.M), out


def container_problems(
    name: str,
    report: dict[str, Any],
    env: dict[str, str],
    mounts: dict[str, str],
    names: set[str],
) -> list[str]:
    """How the container's view differs from the expected variables and read-only mounts."""
    problems = []
    got_env = {k: v for k, v in report["env"].items() if k in names}
    if got_env != env:
        problems.append(f"{name}: variables {got_env}, expected {env}")
    for path, options in report["mounts"].items():
        if path not in mounts:
            if options is not None:
                problems.append(f"{name}: {path} is mounted ({options}) but should not be")
            continue
        host = host_files(Path(mounts[path]))
        if options is None:
            problems.append(f"{name}: nothing mounted at {path}")
            continue
        if "ro" not in options or report["writable"][path]:
            problems.append(f"{name}: {path} is mounted {options}, not read-only")
        if report["files"][path] != host:
            problems.append(f"{name}: {path} holds {report['files'][path]}, not {host}")
    if not mounts:
        present = {p: f for p, f in report["files"].items() if f is not None}
        if present:
            problems.append(f"{name}: driver paths exist without a GPU: {present}")
    return problems


def anchor_problems(anchors: list[tuple[str, str, str]], seen: dict[str, Any]) -> list[str]:
    problems = []
    for name, key, want in anchors:
        report = seen[name]
        if key.startswith("/"):
            if want not in (report["files"][key] or {}):
                problems.append(f"{name}: no {want or 'file'} at {key}: {report['files'][key]}")
        elif report["env"].get(key) != want:
            problems.append(f"{name}: {key}={report['env'].get(key)!r}, expected {want!r}")
    return problems


def test_the_kubelet_keeps_the_advertised_gpus(
    real_cluster: LocalCluster, driver_root: Path
) -> None:
    """After its status updates since the patch, the node still offers both."""
    node = node_of(real_cluster)
    patched = time.time()

    def heartbeat() -> float:
        status = get_json(real_cluster, "node", node.name)["status"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        return calendar.timegm(time.strptime(ready["lastHeartbeatTime"], "%Y-%m-%dT%H:%M:%SZ"))

    # nodeStatusUpdateFrequency is 5s on the real node.
    wait_until(lambda: heartbeat() > patched, 20, "a kubelet status update")
    status = get_json(real_cluster, "node", node.name)["status"]
    for part in ("capacity", "allocatable"):
        assert {r: status[part].get(r) for r in (GPU, LEGACY)} == {GPU: "4", LEGACY: "4"}, part
    assert str(driver_root).startswith(str(node.root) + os.sep)
