"""`dlk8s-operator convert`: the seed operators' jobs as dlk8s jobs.

Reads manifests as the users of the four old operators have them and prints
the same jobs as dlk8s manifests (multi-document YAML) on standard output:

- TfJob of the TensorFlow operator (`tensorflow.org/v1alpha1`), including
  the README's `replica_specs` spelling and objects exported with
  `kubectl get -o yaml` (server fields, `IsDefaultPS`, `RuntimeId`, status);
- MXJob of the MXNet fork (`fioravanzo.org/v1alpha1`), `mxPort`;
- Caffe2Job (`kubeflow.org/v1alpha1`) in both shapes: one `replicaSpecs`
  object with `backendSpecs`, and the list with `ReplicaType` and `backend`;
- EDL's TrainingJob (`paddlepaddle.org/v1`) with its snake_case and
  `min-instance` fields, as a PaddleJob.

Every field it renames, moves or drops gets one note on standard error, so
nothing changes silently. The MXNet fork's README published its GPU example
with YAML aliases used before their anchors; such files are read the way
their author meant, each repair noted too.

Exit status: 0 when every job converted into a manifest dlk8s accepts; 1 when
a job could not be converted or would still be refused (the note says why;
the other jobs are printed all the same); 2 when a file cannot be read.

This module imports only the job layer, the standard library and PyYAML, so
it works without a cluster or the Kubernetes client.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent, ScalarEvent
from yaml.nodes import Node, ScalarNode

from dlk8s.job.api import API_VERSION
from dlk8s.job.kinds import KINDS
from dlk8s.job.resources import GPU, LEGACY_GPU

Obj = dict[str, Any]

# Fields the API server sets on an object; an exported manifest carries them,
# a new object must not.
SERVER_METADATA: Final = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "clusterName",
    "managedFields",
)
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True)
class Note:
    """One field the conversion changed or dropped, or why a job is refused."""

    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class Converted:
    """What one input file turned into."""

    jobs: list[Obj] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    failed: bool = False


class _Notes:
    """Collects the notes of one document, each prefixed with where it came from."""

    def __init__(self, out: list[Note], where: str) -> None:
        self._out = out
        self.where = where

    def __call__(self, path: str, message: str) -> None:
        self._out.append(Note(self.where, f"{path}: {message}" if path else message))


# --- reading YAML as the seeds' users have it -----------------------------------


def _is_empty_scalar(event: object) -> bool:
    return (
        isinstance(event, ScalarEvent)
        and event.value == ""
        and event.tag is None
        and event.style is None
    )


class _Scout(yaml.SafeLoader):
    """First pass: every anchor's definitions per document, in order, whatever the errors."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.document = -1
        self.definitions: dict[tuple[int, str], list[Node]] = {}

    def compose_document(self) -> Node | None:
        self.document += 1
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: object) -> Node | None:  # type: ignore[override]
        if self.check_event(AliasEvent):
            event = self.get_event()
            if event.anchor in self.anchors:
                return self.anchors[event.anchor]
            return ScalarNode("tag:yaml.org,2002:null", "", event.start_mark, event.end_mark)
        event = self.peek_event()
        anchor = event.anchor
        if anchor is not None:
            self.anchors.pop(anchor, None)
        node = super().compose_node(parent, index)  # type: ignore[arg-type]
        if anchor is not None and node is not None:
            self.definitions.setdefault((self.document, anchor), []).append(node)
        return node


class _Forgiving(yaml.SafeLoader):
    """Second pass: resolves what a strict loader refuses, noting each repair.

    - an alias used before its anchor reads as the anchor's later definition;
    - an anchor on an empty value (`key: &name` with nothing after it) whose
      name has a real definition elsewhere reads as that definition: the `*`
      of an alias was lost, as in the MXNet fork's published GPU example;
    - an anchor defined twice: the later definition wins from there on, as
      YAML 1.2 says.
    """

    def __init__(
        self, stream: str, content: dict[tuple[int, str], Node], repairs: list[str]
    ) -> None:
        super().__init__(stream)
        self._all_content = content
        self._content: dict[str, Node] = {}
        self._document = -1
        self._repairs = repairs

    def compose_document(self) -> Node | None:
        # Anchors never reach across documents.
        self._document += 1
        self._content = {a: n for (d, a), n in self._all_content.items() if d == self._document}
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: object) -> Node | None:  # type: ignore[override]
        if self.check_event(AliasEvent):
            event = self.peek_event()
            if event.anchor not in self.anchors and event.anchor in self._content:
                self.get_event()
                node = self._content[event.anchor]
                self._repairs.append(
                    f"line {event.start_mark.line + 1}: *{event.anchor} is used before"
                    f" &{event.anchor} is defined (line {node.start_mark.line + 1});"
                    " read as that definition"
                )
                return node
            return super().compose_node(parent, index)  # type: ignore[arg-type]
        event = self.peek_event()
        anchor = event.anchor
        if anchor is not None:
            content = self._content.get(anchor)
            here = event.start_mark.line
            if _is_empty_scalar(event) and content is not None:
                self.get_event()
                self.anchors[anchor] = content
                self._repairs.append(
                    f"line {here + 1}: &{anchor} marks an empty value while &{anchor} on line"
                    f" {content.start_mark.line + 1} has one; read as *{anchor} (that value)"
                )
                return content
            if anchor in self.anchors:
                del self.anchors[anchor]
                if content is None or content.start_mark.line != here:
                    self._repairs.append(
                        f"line {here + 1}: &{anchor} is defined again; the later definition"
                        " is used from here on"
                    )
        return super().compose_node(parent, index)  # type: ignore[arg-type]


def load_documents(text: str) -> tuple[list[Any], list[str]]:
    """The documents of `text`, and the repairs a strict YAML reader would refuse."""
    try:
        return list(yaml.safe_load_all(text)), []
    except ComposerError:
        pass
    scout = _Scout(text)
    try:
        while scout.check_node():
            scout.get_node()
    finally:
        scout.dispose()
    content: dict[tuple[int, str], Node] = {}
    for anchor, nodes in scout.definitions.items():
        real = [n for n in nodes if not (isinstance(n, ScalarNode) and n.value == "")]
        if real:
            content[anchor] = real[0]
    repairs: list[str] = []
    loader = _Forgiving(text, content, repairs)
    try:
        documents = []
        while loader.check_data():
            documents.append(loader.get_data())
    finally:
        loader.dispose()
    return documents, repairs


# --- shared pieces ------------------------------------------------------------------


def _metadata(raw: object, note: _Notes) -> Obj:
    if not isinstance(raw, dict):
        if raw is not None:
            note("metadata", "not an object; dropped")
        return {}
    meta: Obj = _unshared(raw)
    for key in SERVER_METADATA:
        if key in meta:
            del meta[key]
            note(f"metadata.{key}", "dropped: the API server sets it for the new object")
    for key in ("ownerReferences", "finalizers"):
        if key in meta:
            del meta[key]
            note(f"metadata.{key}", "dropped: it referred to the old operator's objects")
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        del annotations[LAST_APPLIED]
        note(f"metadata.annotations[{LAST_APPLIED}]", "dropped: it held the old manifest")
        if not annotations:
            del meta["annotations"]
    return meta


def _unshared(value: Any) -> Any:
    """A copy in which no two places share an object: YAML anchors and aliases
    make one object appear in several replicas, and a change to one must not
    change the others (nor make the output carry anchors)."""
    if isinstance(value, dict):
        return {k: _unshared(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshared(v) for v in value]
    return value


def _replace_key(obj: Obj, old: str, new: str, value: Any) -> None:
    """obj with `old` replaced by `new: value` at the same place (the order is kept)."""
    items = [(new, value) if k == old else (k, v) for k, v in obj.items()]
    obj.clear()
    obj.update(items)


def _drop(obj: Obj, key: str, path: str, note: _Notes, why: str) -> Any:
    value = obj.pop(key)
    note(path, f"dropped: {why}")
    return value


def _rename(obj: Obj, old: str, new: str, path: str, note: _Notes, why: str = "") -> None:
    """Renames obj[old] to obj[new] where it stands."""
    parent = path.rsplit(".", 1)[0] + "." if "." in path else ""
    if new in obj:
        del obj[old]
        note(path, f"dropped: {parent}{new} is set as well and wins")
        return
    _replace_key(obj, old, new, obj[old])
    note(path, f"renamed to {parent}{new}" + (f" ({why})" if why else ""))


def _drop_unknown(obj: Obj, known: tuple[str, ...], path: str, note: _Notes) -> None:
    for key in [k for k in obj if k not in known]:
        _drop(obj, key, f"{path}.{key}", note, "dlk8s has no such field")


def _templates(replica_specs: list[Any]) -> Iterator[tuple[int, Obj]]:
    for index, entry in enumerate(replica_specs):
        if isinstance(entry, dict) and isinstance(entry.get("template"), dict):
            yield index, entry["template"]


def _clean_template(template: Obj, path: str, note: _Notes) -> None:
    """`kubectl get -o yaml` writes `creationTimestamp: null` into templates."""
    meta = template.get("metadata")
    if isinstance(meta, dict):
        for key in [k for k in SERVER_METADATA if k in meta]:
            del meta[key]
            note(f"{path}.metadata.{key}", "dropped: the API server sets it")
        if not meta:
            del template["metadata"]


def _scheduler_name(spec: Obj, replica_specs: list[Any], note: _Notes) -> None:
    """The seeds' spec.schedulerName becomes each template's schedulerName."""
    name = spec.pop("schedulerName")
    note(
        "spec.schedulerName",
        "moved into replicaSpecs[].template.spec.schedulerName of every replica"
        " (dlk8s takes the pod's own field)",
    )
    for index, template in _templates(replica_specs):
        pod = template.setdefault("spec", {})
        if isinstance(pod, dict) and "schedulerName" not in pod:
            pod["schedulerName"] = name
        elif isinstance(pod, dict) and pod["schedulerName"] != name:
            note(
                f"spec.replicaSpecs[{index}].template.spec.schedulerName",
                "kept; it differs from spec.schedulerName",
            )


def _termination_policy(spec: Obj, deciding: str, note: _Notes) -> None:
    policy = spec.pop("terminationPolicy")
    chief = policy.get("chief") if isinstance(policy, dict) else None
    same = (
        isinstance(chief, dict)
        and str(chief.get("replicaName", "")).upper() == deciding
        and chief.get("replicaIndex", 0) in (0, None)
    )
    if same or chief is None:
        note("spec.terminationPolicy", f"dropped: in dlk8s the {deciding} always decides the job")
    else:
        note(
            "spec.terminationPolicy",
            f"dropped: its chief {chief} no longer decides the job; in dlk8s the {deciding}"
            " does (exit 0 succeeds, 1-127 fails, 128-255 is retried)",
        )


def _legacy_gpu(replica_specs: list[Any], note: _Notes) -> None:
    """Asks for the device plugin's resource where the seed asked for the legacy one."""
    for index, template in _templates(replica_specs):
        pod = template.get("spec")
        containers = pod.get("containers") if isinstance(pod, dict) else None
        for c_index, container in enumerate(containers if isinstance(containers, list) else []):
            resources = container.get("resources") if isinstance(container, dict) else None
            for part in ("limits", "requests"):
                amounts = resources.get(part) if isinstance(resources, dict) else None
                if isinstance(amounts, dict) and LEGACY_GPU in amounts:
                    amounts[GPU] = amounts.pop(LEGACY_GPU)
                    note(
                        f"spec.replicaSpecs[{index}].template.spec.containers[{c_index}]"
                        f".resources.{part}[{LEGACY_GPU}]",
                        f"renamed to {GPU} (--rename-legacy-gpu)",
                    )


def _server_fields(spec: Obj, note: _Notes, *keys: str) -> None:
    for key in keys:
        if key in spec:
            _drop(spec, key, f"spec.{key}", note, "dlk8s derives it from the job's uid")


# --- the kinds ----------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    rename_legacy_gpu: bool = False


def _tfjob(spec: Obj, note: _Notes, options: Options) -> Obj:
    if "replica_specs" in spec:
        _rename(
            spec,
            "replica_specs",
            "replicaSpecs",
            "spec.replica_specs",
            note,
            "the TfJob README's spelling; its operator read replicaSpecs",
        )
    _server_fields(spec, note, "RuntimeId", "runtimeId")
    specs = spec.get("replicaSpecs")
    replica_specs = specs if isinstance(specs, list) else []
    for index, entry in enumerate(replica_specs):
        if not isinstance(entry, dict):
            continue
        path = f"spec.replicaSpecs[{index}]"
        if "IsDefaultPS" in entry:
            default_ps = entry.pop("IsDefaultPS")
            if default_ps is True and entry.get("tfReplicaType") == "PS" and "template" in entry:
                del entry["template"]
                note(
                    f"{path}.template",
                    "dropped: the old operator generated it for a PS without a template;"
                    " dlk8s gives such a PS the standard gRPC server itself",
                )
            note(f"{path}.IsDefaultPS", "dropped: written by the old operator")
        _drop_unknown(
            entry, ("replicas", "tfReplicaType", "tfPort", "template", "restartPolicy"), path, note
        )
        if isinstance(entry.get("template"), dict):
            _clean_template(entry["template"], f"{path}.template", note)
    if "terminationPolicy" in spec:
        _termination_policy(spec, "MASTER", note)
    if "schedulerName" in spec:
        _scheduler_name(spec, replica_specs, note)
    board = spec.get("tensorboard")
    if isinstance(board, dict):
        for key in ("volumes", "volumeMounts", "serviceType"):
            if key in board and board[key] in (None, "", []):
                _drop(board, key, f"spec.tensorboard.{key}", note, "empty (the old default)")
        _drop_unknown(
            board, ("logDir", "volumes", "volumeMounts", "serviceType"), "spec.tensorboard", note
        )
    if options.rename_legacy_gpu:
        _legacy_gpu(replica_specs, note)
    _drop_unknown(spec, ("replicaSpecs", "tfImage", "tensorboard", "runPolicy"), "spec", note)
    return spec


def _mxjob(spec: Obj, note: _Notes, options: Options) -> Obj:
    _server_fields(spec, note, "RuntimeId", "runtimeId")
    specs = spec.get("replicaSpecs")
    replica_specs = specs if isinstance(specs, list) else []
    for index, entry in enumerate(replica_specs):
        if not isinstance(entry, dict):
            continue
        path = f"spec.replicaSpecs[{index}]"
        for old in ("mxPort", "PsRootPort"):
            if old in entry:
                _rename(
                    entry,
                    old,
                    "psRootPort",
                    f"{path}.{old}",
                    note,
                    "the scheduler's port, DMLC_PS_ROOT_PORT",
                )
        _drop_unknown(
            entry,
            ("replicas", "mxReplicaType", "psRootPort", "template", "restartPolicy"),
            path,
            note,
        )
        if isinstance(entry.get("template"), dict):
            _clean_template(entry["template"], f"{path}.template", note)
    if "mxImage" in spec:
        _drop(
            spec,
            "mxImage",
            "spec.mxImage",
            note,
            "dlk8s adds no default container; every replica's template needs an mxnet container",
        )
    if "terminationPolicy" in spec:
        _termination_policy(spec, "SCHEDULER", note)
    if "schedulerName" in spec:
        _scheduler_name(spec, replica_specs, note)
    if options.rename_legacy_gpu:
        _legacy_gpu(replica_specs, note)
    _drop_unknown(spec, ("replicaSpecs", "runPolicy"), "spec", note)
    return spec


def _caffe2job(spec: Obj, note: _Notes, options: Options) -> Obj:
    _server_fields(spec, note, "RuntimeID", "RuntimeId", "runtimeId")
    for old in ("backend", "Backend"):
        if old in spec:
            backend = spec[old]
            if "backendSpecs" in spec:
                del spec[old]
                note(f"spec.{old}", "dropped: spec.backendSpecs is set as well and wins")
            else:
                _replace_key(spec, old, "backendSpecs", {"backendType": backend})
                note(f"spec.{old}", f"moved to spec.backendSpecs.backendType ({backend!r})")
    specs = spec.get("replicaSpecs")
    if isinstance(specs, dict):
        entry = {"replicaType": "WORKER", **specs}
        spec["replicaSpecs"] = [entry]
        note(
            "spec.replicaSpecs",
            "one object made a one-entry list with replicaType WORKER (that shape had only"
            " workers; a CRD field cannot take both an object and a list)",
        )
    specs = spec.get("replicaSpecs")
    replica_specs = specs if isinstance(specs, list) else []
    for index, entry in enumerate(replica_specs):
        if not isinstance(entry, dict):
            continue
        path = f"spec.replicaSpecs[{index}]"
        for old in ("ReplicaType", "replica_type"):
            if old in entry:
                _rename(entry, old, "replicaType", f"{path}.{old}", note)
        _drop_unknown(entry, ("replicas", "replicaType", "template", "restartPolicy"), path, note)
        if isinstance(entry.get("template"), dict):
            _clean_template(entry["template"], f"{path}.template", note)
    backend = spec.get("backendSpecs")
    if isinstance(backend, dict):
        _drop_unknown(
            backend,
            ("backendType", "redisHost", "redisPort", "nfsPath", "nfsServer", "nfsServerPath"),
            "spec.backendSpecs",
            note,
        )
    if "terminationPolicy" in spec:
        has_master = any(
            isinstance(e, dict) and e.get("replicaType") == "MASTER" for e in replica_specs
        )
        _termination_policy(spec, "MASTER" if has_master else "WORKER", note)
    if "schedulerName" in spec:
        _scheduler_name(spec, replica_specs, note)
    if options.rename_legacy_gpu:
        _legacy_gpu(replica_specs, note)
    _drop_unknown(spec, ("backendSpecs", "replicaSpecs", "runPolicy"), "spec", note)
    return spec


# EDL's snake_case and dashed fields, and their dlk8s names.
_EDL_SPEC: Final = {
    "ports_num": "portsNum",
    "ports_num_for_sparse": "portsNumForSparse",
    "fault_tolerant": "faultTolerant",
}
_EDL_INSTANCES: Final = {"min-instance": "minInstance", "max-instance": "maxInstance"}


def _resources(part: Obj, path: str, note: _Notes) -> None:
    resources = part.get("resources")
    if isinstance(resources, dict):
        _drop_unknown(resources, ("limits", "requests"), f"{path}.resources", note)
        for key in [
            k for k in ("limits", "requests") if k in resources and resources[k] in (None, {})
        ]:
            _drop(resources, key, f"{path}.resources.{key}", note, "empty")
        if not resources:
            del part["resources"]


def _paddle_part(spec: Obj, role: str, known: tuple[str, ...], note: _Notes) -> None:
    part = spec.get(role)
    if not isinstance(part, dict):
        return
    path = f"spec.{role}"
    for old, new in _EDL_INSTANCES.items():
        if old in part:
            _rename(part, old, new, f"{path}.{old}", note)
    if "etcd-endpoint" in part:
        _drop(
            part,
            "etcd-endpoint",
            f"{path}.etcd-endpoint",
            note,
            "the master pod of a fault-tolerant PaddleJob runs its own etcd",
        )
    if "replicaSpec" in part:
        _drop(
            part,
            "replicaSpec",
            f"{path}.replicaSpec",
            note,
            "EDL wrote the Job or ReplicaSet it made there; dlk8s owns pods directly",
        )
    _drop_unknown(part, known, path, note)
    _resources(part, path, note)


def _trainingjob(spec: Obj, note: _Notes, options: Options) -> Obj:
    for old, new in _EDL_SPEC.items():
        if old in spec:
            _rename(spec, old, new, f"spec.{old}", note, "EDL's snake_case")
    trainer = spec.get("trainer")
    if "passes" in spec:
        passes = spec.pop("passes")
        if isinstance(trainer, dict) and "passes" not in trainer:
            trainer["passes"] = passes
            note("spec.passes", "moved to spec.trainer.passes")
        else:
            note("spec.passes", "dropped: spec.trainer.passes is set and wins")
    if "host_network" in spec:
        _drop(
            spec,
            "host_network",
            "spec.host_network",
            note,
            "PaddleJob pods use the pod network (EDL needed a port manager for the host's)",
        )
    for key in ("volumes", "VolumeMounts", "volumeMounts"):
        if key in spec:
            value = spec.pop(key)
            if value not in (None, []):
                note(
                    f"spec.{key}",
                    "dropped: PaddleJob builds its pods itself and mounts no"
                    " volumes; bake the data into the image or read it over the network",
                )
            else:
                note(f"spec.{key}", "dropped: empty")
    _paddle_part(
        spec,
        "trainer",
        ("entrypoint", "workspace", "passes", "minInstance", "maxInstance", "resources"),
        note,
    )
    _paddle_part(spec, "pserver", ("minInstance", "maxInstance", "resources"), note)
    _paddle_part(spec, "master", ("resources",), note)
    if "master" in spec and not spec["master"]:
        del spec["master"]
    if options.rename_legacy_gpu:
        for role in ("trainer", "pserver", "master"):
            resources = (
                spec.get(role, {}).get("resources") if isinstance(spec.get(role), dict) else None
            )
            for part_name in ("limits", "requests"):
                amounts = resources.get(part_name) if isinstance(resources, dict) else None
                if isinstance(amounts, dict) and LEGACY_GPU in amounts:
                    amounts[GPU] = amounts.pop(LEGACY_GPU)
                    note(
                        f"spec.{role}.resources.{part_name}[{LEGACY_GPU}]",
                        f"renamed to {GPU} (--rename-legacy-gpu)",
                    )
    _drop_unknown(
        spec,
        (
            "image",
            "port",
            "portsNum",
            "portsNumForSparse",
            "faultTolerant",
            "trainer",
            "pserver",
            "master",
            "runPolicy",
        ),
        "spec",
        note,
    )
    return spec


@dataclass(frozen=True)
class SeedKind:
    """One old operator's kind: what it is called there and here."""

    seed_kind: str
    api_versions: tuple[str, ...]
    kind: str
    convert: Callable[[Obj, _Notes, Options], Obj]


SEED_KINDS: Final = (
    # tf-operator 0.1 moved the same TfJob to kubeflow.org/v1alpha1 as TFJob.
    SeedKind("TfJob", ("tensorflow.org/v1alpha1", "kubeflow.org/v1alpha1"), "TFJob", _tfjob),
    SeedKind("MXJob", ("fioravanzo.org/v1alpha1", "kubeflow.org/v1alpha1"), "MXJob", _mxjob),
    SeedKind("Caffe2Job", ("kubeflow.org/v1alpha1",), "Caffe2Job", _caffe2job),
    SeedKind("TrainingJob", ("paddlepaddle.org/v1",), "PaddleJob", _trainingjob),
)


def _seed_kind(kind: str) -> SeedKind | None:
    return next((s for s in SEED_KINDS if kind.lower() == s.seed_kind.lower()), None)


def _not_a_job(doc: Obj) -> str:
    kind = doc.get("kind")
    data = doc.get("data")
    if (
        kind == "ConfigMap"
        and isinstance(data, dict)
        and any(k.replace("-", "_") == "controller_config_file.yaml" for k in data)
    ):
        return (
            "a seed operator's controller config, not a job: left out. Give its"
            " accelerators to the dlk8s chart as config.accelerators (or keep the file in"
            " a ConfigMap named by config.existingConfigMap); see docs/chart.md"
        )
    return f"{doc.get('apiVersion')} {kind} is not a job of a seed operator: left out"


def convert_document(
    doc: object, source: str, index: int, options: Options, notes: list[Note]
) -> tuple[Obj | None, bool]:
    """One input document as a dlk8s job (or None), and whether it failed."""
    if doc is None:
        return None, False
    where = f"{source}: document {index + 1}"
    if not isinstance(doc, dict):
        notes.append(Note(where, "not a Kubernetes object: left out"))
        return None, True
    api_version = str(doc.get("apiVersion", ""))
    kind = str(doc.get("kind", ""))
    name = (
        (doc.get("metadata") or {}).get("name") if isinstance(doc.get("metadata"), dict) else None
    )
    where = f"{source}: {kind or 'document ' + str(index + 1)} {name or '(no name)'}"
    note = _Notes(notes, where)
    if api_version == API_VERSION and kind in KINDS:
        note("", "already a dlk8s job: printed as it is")
        return _unshared(doc), False
    seed = _seed_kind(kind)
    if seed is None:
        note("", _not_a_job(doc))
        return None, False
    if api_version not in seed.api_versions:
        # e.g. training-operator's kubeflow.org/v1 TFJob, whose replicas are a map
        note(
            "apiVersion",
            f"{api_version} {kind} is not the seed operators' shape (they used"
            f" {', '.join(seed.api_versions)}): left out",
        )
        return None, True
    job: Obj = {"apiVersion": API_VERSION, "kind": seed.kind}
    note("apiVersion", f"{api_version} is now {API_VERSION}")
    if kind != seed.kind:
        note("kind", f"{kind} is now {seed.kind}")
    job["metadata"] = _metadata(doc.get("metadata"), note)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        note("spec", "missing or not an object: the job cannot be converted")
        return None, True
    job["spec"] = seed.convert(_unshared(spec), note, options)
    if "status" in doc:
        note("status", "dropped: the old operator's status; dlk8s writes its own")
    for key in [k for k in doc if k not in ("apiVersion", "kind", "metadata", "spec", "status")]:
        note(key, "dropped: not part of a job")
    problems = KINDS[seed.kind].validate(job)
    for problem in problems:
        note("", f"dlk8s would refuse the converted job: {problem}")
    return job, bool(problems)


def convert_text(text: str, source: str, options: Options = Options()) -> Converted:
    """Every job of one file's text, converted, with its notes."""
    result = Converted()
    try:
        documents, repairs = load_documents(text)
    except yaml.YAMLError as err:
        result.notes.append(Note(source, f"not valid YAML: {err}"))
        result.failed = True
        return result
    result.notes += [Note(source, repair) for repair in repairs]
    for index, doc in enumerate(documents):
        job, failed = convert_document(doc, source, index, options, result.notes)
        if job is not None:
            result.jobs.append(job)
        result.failed = result.failed or failed
    return result


def dump(jobs: list[Obj]) -> str:
    """Multi-document YAML, fields in the order the conversion left them."""
    return "".join(
        "---\n" + yaml.safe_dump(job, sort_keys=False, default_flow_style=False, width=100)
        for job in jobs
    )


# --- the command --------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        dest="filenames",
        action="append",
        required=True,
        metavar="FILE",
        help="a file of seed manifests (TfJob, MXJob, Caffe2Job, EDL TrainingJob),"
        " '-' for standard input; may be repeated",
    )
    parser.add_argument(
        "--rename-legacy-gpu",
        action="store_true",
        help=f"ask for {GPU} (the device plugin's resource) where a container asks for the"
        f" legacy {LEGACY_GPU}",
    )


def run(args: argparse.Namespace, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr) -> int:
    options = Options(rename_legacy_gpu=bool(getattr(args, "rename_legacy_gpu", False)))
    jobs: list[Obj] = []
    failed = False
    for filename in args.filenames:
        source = "<stdin>" if filename == "-" else filename
        try:
            if filename == "-":
                text = sys.stdin.read()
            else:
                with open(filename, encoding="utf-8") as handle:
                    text = handle.read()
        except OSError as err:
            print(f"{source}: cannot read: {err.strerror or err}", file=stderr)
            return 2
        converted = convert_text(text, source, options)
        for item in converted.notes:
            print(item, file=stderr)
        jobs += converted.jobs
        failed = failed or converted.failed
    stdout.write(dump(jobs))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="dlk8s-operator convert", description=__doc__.split("\n")[0]
    )
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
