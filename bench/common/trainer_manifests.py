"""What Kubeflow Trainer v2 and JobSet need in the cluster and on disk, as
pure data: the peer's settings, the managers' config files, their RBAC and
webhook configurations (from the manifests `make tools-bench` copies out of
their modules), the ClusterTrainingRuntime of the burst's TFJob and the
TrainJobs that use it. trainer.py runs the managers with them.

The burst's TFJob (harness.tfjob: a MASTER, 2 WORKERs and a PS, each a pod
with container ``tensorflow`` of the same image, each behind a headless
Service) becomes a TrainJob whose ClusterTrainingRuntime holds a JobSet of
three replicated Jobs, ``master`` (1 pod), ``worker`` (2 pods, an Indexed
Job) and ``ps`` (1 pod), with the same pod templates. JobSet gives every
pod a stable DNS name, ``<job>-<role>-0-<index>.<job>``, through one
headless Service per JobSet (``network.enableDNSHostnames``, its default),
where training-operator makes one per pod. No ``mlPolicy`` (Trainer's
plain runtime): no framework's environment, as the TFJob's pods here need
none (kwok runs them). As the TFJob's MASTER, the ``master`` Job decides:
the JobSet succeeds when it does (its ``successPolicy``). The pods are made
by kube-controller-manager's Job controller from the Jobs JobSet creates.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

# Where their installs put them (trainer's manifests/overlays/manager and
# jobset's config/default), and the names kustomize gives them there.
TRAINER_NAMESPACE = "kubeflow-system"
TRAINER_SERVICE_ACCOUNT = "kubeflow-trainer-controller-manager"
JOBSET_NAMESPACE = "jobset-system"
JOBSET_PREFIX = "jobset-"
JOBSET_SERVICE_ACCOUNT = JOBSET_PREFIX + "controller-manager"
# The names trainer-controller-manager's main.go gives its webhook configurations.
TRAINER_WEBHOOKS = {
    "MutatingWebhookConfiguration": "defaulter.trainer.kubeflow.org",
    "ValidatingWebhookConfiguration": "validator.trainer.kubeflow.org",
}
RUNTIME = "dlk8s-bench-tfjob"
TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs"
# The runtime's replicated Jobs: the TFJob's roles (harness.tfjob's burst shape).
REPLICATED_JOBS = (("master", "MASTER"), ("worker", "WORKER"), ("ps", "PS"))
TRAINJOB_KIND = "TrainJob.trainer.kubeflow.org"


@dataclass(frozen=True)
class Settings:
    """Both managers' client rate limits and concurrent reconciles."""

    name: str
    jobset_qps: int
    jobset_burst: int
    jobset_workers: int
    trainer_qps: int
    trainer_burst: int
    trainer_workers: int


SETTINGS = {
    # Their defaults: JobSet's built-in 500 QPS (burst 500) and
    # controller-runtime's one reconcile at a time; Trainer's install's
    # config (manifests/base/manager): 50 QPS (burst 100), and 5 TrainJob
    # reconciles that v2.3.0 never applies (trainer_config): one at a time.
    "stock": Settings("stock", 500, 500, 1, 50, 100, 1),
    # As training-operator's tuned: 1000 QPS (burst 1500), 8 reconciles.
    "tuned": Settings("tuned", 1000, 1500, 8, 1000, 1500, 8),
}


# --- the managers' config files ------------------------------------------------------------


def jobset_config(s: Settings, ports: dict[str, int], certs: Path) -> dict[str, Any]:
    """JobSet's Configuration: its webhook and metrics servers on 127.0.0.1
    with the harness's certificates (its own certificate management off),
    no leader election (one process); the client's limits only where they
    are not its defaults."""
    cfg: dict[str, Any] = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports["jobset-webhook"], "certDir": str(certs)},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['jobset-metrics']}", "certDir": str(certs)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset-health']}"},
    }
    if (s.jobset_qps, s.jobset_burst) != (500, 500):
        cfg["clientConnection"] = {"qps": s.jobset_qps, "burst": s.jobset_burst}
    return cfg


def jobset_flags(s: Settings) -> list[str]:
    """--concurrent-reconciles (tools/patches/jobset-concurrent-reconciles.patch)
    only where it is not controller-runtime's default."""
    return [f"--concurrent-reconciles={s.jobset_workers}"] if s.jobset_workers != 1 else []


def trainer_flags(s: Settings) -> list[str]:
    """--concurrent-reconciles (tools/patches/trainer-concurrent-reconciles.patch)
    only where it is not controller-runtime's default."""
    return [f"--concurrent-reconciles={s.trainer_workers}"] if s.trainer_workers != 1 else []


def trainer_config(s: Settings, ports: dict[str, int]) -> dict[str, Any]:
    """Trainer's Configuration as its install ships it, but for: the webhook
    server on 127.0.0.1 (its certificates the harness's, its own
    management off), plain metrics and probes on 127.0.0.1, no leader
    election (one process), and the settings' limits. Its
    groupKindConcurrency stays the install's: v2.3.0's TrainJob controller
    watches TrainJobs through a raw source, for which controller-runtime
    never reads it (the controller logs "worker count": 1); trainer_flags
    sets the reconciles instead."""
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "health": {
            "healthProbeBindAddress": f"127.0.0.1:{ports['trainer-health']}",
            "readinessEndpointName": "readyz",
            "livenessEndpointName": "healthz",
        },
        "metrics": {"bindAddress": f"127.0.0.1:{ports['trainer-metrics']}", "secureServing": False},
        "webhook": {"port": ports["trainer-webhook"], "host": "127.0.0.1"},
        "leaderElection": {"leaderElect": False},
        "controller": {
            "groupKindConcurrency": {
                TRAINJOB_KIND: 5,
                "TrainingRuntime.trainer.kubeflow.org": 1,
                "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
            }
        },
        "certManagement": {"enable": False},
        "clientConnection": {"qps": s.trainer_qps, "burst": s.trainer_burst},
    }


# --- RBAC and webhooks, from their manifests ------------------------------------------------


def _docs(folder: Path) -> list[dict[str, Any]]:
    """The documents its kustomization.yaml lists as resources."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((folder / name).read_text()) if d]
    return docs


def rbac(folder: Path, namespace: str, prefix: str = "") -> list[dict[str, Any]]:
    """The manifests' RBAC in `namespace`, every name (and each reference to
    one) with kustomize's `prefix`, as their installs apply it."""
    docs = _docs(folder)
    for doc in docs:
        meta = doc["metadata"]
        meta["name"] = prefix + meta["name"]
        if doc["kind"] in ("ServiceAccount", "Role", "RoleBinding"):
            meta["namespace"] = namespace
        if "roleRef" in doc:
            doc["roleRef"]["name"] = prefix + doc["roleRef"]["name"]
        for subject in doc.get("subjects", []):
            if subject["kind"] == "ServiceAccount":
                subject["name"] = prefix + subject["name"]
                subject["namespace"] = namespace
    return docs


def json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """kustomize's JSON6902 patches of the manifests: add and replace."""
    doc = copy.deepcopy(doc)
    for op in ops:
        if op["op"] not in ("add", "replace"):
            raise ValueError(f"unsupported patch op {op['op']}")
        *parents, last = [p for p in op["path"].split("/") if p]
        target: Any = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if isinstance(target, list):
            target[int(last)] = copy.deepcopy(op["value"])
        else:
            target[last] = copy.deepcopy(op["value"])
    return doc


def webhook_configurations(
    folder: Path, names: dict[str, str], base_url: str, ca_bundle: str, patches: dict[str, Path]
) -> list[dict[str, Any]]:
    """The webhook configurations of `folder`/manifests.yaml with their
    kustomization's `patches` (by kind) applied, named by `names` (by kind),
    each webhook at `base_url` + its path, trusting `ca_bundle` (base64);
    failurePolicy as shipped (Fail)."""
    out = []
    for doc in yaml.safe_load_all((folder / "manifests.yaml").read_text()):
        if not doc:
            continue
        patch = patches.get(doc["kind"])
        if patch is not None:
            doc = json_patch(doc, yaml.safe_load(patch.read_text()))
        doc["metadata"]["name"] = names[doc["kind"]]
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": base_url + path, "caBundle": ca_bundle}
        out.append(doc)
    return out


def jobset_crd(folder: Path) -> dict[str, Any]:
    """JobSet's CRD without the conversion webhook its kustomization adds:
    it serves one version, so nothing is converted."""
    path = folder / "bases" / "jobset.x-k8s.io_jobsets.yaml"
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    doc["spec"].pop("conversion", None)
    return doc


# --- the runtime and the jobs ----------------------------------------------------------------


def cluster_training_runtime(tfjob: dict[str, Any]) -> dict[str, Any]:
    """A ClusterTrainingRuntime of `tfjob`'s shape (a MASTER, WORKERs, PS):
    one replicated Job per role, of as many pods as the role has replicas,
    with its pod template."""
    roles = {r["tfReplicaType"]: r for r in tfjob["spec"]["replicaSpecs"]}
    replicated = []
    for name, role in REPLICATED_JOBS:
        if role not in roles:
            continue
        pods = roles[role]["replicas"]
        template = copy.deepcopy(roles[role]["template"])
        template.setdefault("spec", {}).setdefault("restartPolicy", "Never")
        replicated.append(
            {
                "name": name,
                "replicas": 1,
                "template": {
                    "spec": {
                        "parallelism": pods,
                        "completions": pods,
                        "completionMode": "Indexed",
                        "template": template,
                    }
                },
            }
        )
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": RUNTIME},
        "spec": {"template": {"spec": {"replicatedJobs": replicated, **_success_policy(roles)}}},
    }


def _success_policy(roles: dict[str, Any]) -> dict[str, Any]:
    """The TFJob's: its MASTER decides (JobSet's default waits for every Job)."""
    if "MASTER" not in roles:
        return {}
    return {"successPolicy": {"operator": "Any", "targetReplicatedJobs": ["master"]}}


def trainjob(job: dict[str, Any], runtime: str = RUNTIME) -> dict[str, Any]:
    """dlk8s's TFJob as a TrainJob of the same name on the runtime of its shape."""
    out: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": job["metadata"]["name"]},
        "spec": {"runtimeRef": {"name": runtime}},
    }
    if "labels" in job["metadata"]:
        out["metadata"]["labels"] = dict(job["metadata"]["labels"])
    return out


def replicated_jobs(tfjob: dict[str, Any]) -> int:
    """How many replicated Jobs the runtime of `tfjob`'s shape has."""
    roles = {r["tfReplicaType"] for r in tfjob["spec"]["replicaSpecs"]}
    return sum(1 for _, role in REPLICATED_JOBS if role in roles)


# --- controller-runtime's metrics, all controllers of a process ------------------------------

_REQUESTS = re.compile(
    r'^rest_client_requests_total\{[^}]*method="([^"]*)"[^}]*\} ([0-9.e+]+)$', re.M
)
_RECONCILES = re.compile(r"^controller_runtime_reconcile_total\{[^}]*\} ([0-9.e+]+)$", re.M)
_DEPTH = re.compile(r"^workqueue_depth\{[^}]*\} ([0-9.e+]+)$", re.M)


def requests_of(metrics: str) -> dict[str, int]:
    """API requests by method."""
    counts: dict[str, int] = {}
    for method, value in _REQUESTS.findall(metrics):
        counts[method] = counts.get(method, 0) + int(float(value))
    return counts


def reconciles_of(metrics: str) -> int:
    return int(sum(float(v) for v in _RECONCILES.findall(metrics)))


def queue_depth_of(metrics: str) -> float:
    return sum(float(v) for v in _DEPTH.findall(metrics))
