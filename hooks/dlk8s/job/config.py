"""The controller configuration file (controller_config_file.yaml).

Shape, as the chart renders it and as the TfJob operator's README documents::

    accelerators:
      nvidia.com/gpu:
        volumes: [{name, mountPath, hostPath}]
        envVars: [{name, value}]
    tfImage: tensorflow/tensorflow:2.16.1
    grpcServerFilePath: /etc/dlk8s/grpc_tensorflow_server.py
    images:                 # the other images the operator puts into pods
      redis: redis:7.2-alpine             # a Caffe2Job MASTER's redis server
      etcd: quay.io/coreos/etcd:v3.2.1    # a PaddleJob master's etcd

The seed README puts grpcServerFilePath inside `accelerators`; that layout is
accepted too (a top-level value wins), since a key whose value is a string
cannot be a resource's driver settings.

`load_config` is the only function here that reads files. Everything else is
pure, and a malformed file is an error at start-up (ConfigError), not later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import yaml

DEFAULT_TF_IMAGE: Final = "tensorflow/tensorflow:2.16.1"
# The images of the containers the operator adds to pods besides the PS's
# gRPC server: settings, so that a cluster can mirror them (or, like the
# local one, has no registry at all). The chart's config.images.* sets them.
DEFAULT_REDIS_IMAGE: Final = "redis:7.2-alpine"
DEFAULT_ETCD_IMAGE: Final = "quay.io/coreos/etcd:v3.2.1"
GRPC_SERVER_SCRIPT_KEY: Final = "grpc_tensorflow_server.py"
# Options that the seed's layout nests under `accelerators`.
_OPTIONS_TOLERATED_IN_ACCELERATORS: Final = ("grpcServerFilePath", "tfImage")
_NO_SCRIPT: Final = "grpcServerFilePath is not set in the controller config"


class Admission:
    """Whether new elastic trainers wait for the autoscaler's admission.

    The one piece of state the autoscaler shares with the reconciler of its
    process. The autoscaler closes it while a job that has waited too long
    has nodes kept for it (autoscaler.plan): a trainer created then waits
    behind kinds.elastic.ADMISSION_GATE until the autoscaler gives its job
    a trainer count, so that kube-scheduler cannot hand the kept room to a
    younger job's pods. Open, trainers are scheduled at once. A bool is
    read and written whole under the GIL, so is a set's membership: no lock.
    """

    def __init__(self) -> None:
        self.closed = False
        # The jobs (uids) whose count this process's autoscaler has written:
        # only such a count admits a job. Anyone who may edit a job may write
        # the annotation too (the chart's policy refuses it; a cluster may
        # not run it), and that must lift no gate. Not kept across restarts:
        # the autoscaler's next pass admits a gated job again.
        self.given: set[str] = set()

    def admitted(self, uid: str) -> bool:
        return uid in self.given


class ConfigError(ValueError):
    """The controller configuration is unusable; the message names the field."""


@dataclass(frozen=True)
class AcceleratorVolume:
    name: str
    mount_path: str
    host_path: str
    # The hostPath's `type`: "" mounts whatever is there, and on a node
    # without the driver the runtime creates the missing path as an empty
    # directory, so the pod starts and fails later, obscurely. Directory or
    # File makes such a pod fail to start, with an event naming the path.
    host_path_type: str = ""


@dataclass(frozen=True)
class Accelerator:
    """What a container that asks for one resource (e.g. a GPU) gets injected."""

    volumes: tuple[AcceleratorVolume, ...] = ()
    env_vars: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ControllerConfig:
    accelerators: Mapping[str, Accelerator] = field(default_factory=lambda: MappingProxyType({}))
    tf_image: str = DEFAULT_TF_IMAGE
    redis_image: str = DEFAULT_REDIS_IMAGE
    etcd_image: str = DEFAULT_ETCD_IMAGE
    grpc_server_file_path: str = ""
    # Content of the gRPC server script; "" when it could not be read, and
    # then grpc_server_error says why (reported only when a job needs it).
    grpc_server_script: str = ""
    grpc_server_error: str = _NO_SCRIPT
    # Give each job a NetworkPolicy (job.network; `--network-policies`, the
    # chart's networkPolicy.enabled): a flag, not a config file value, as it
    # needs RBAC on NetworkPolicies and a watch of them.
    network_policies: bool = False
    # The TensorBoard Service types a job may ask for
    # (`--tensorboard-service-types`, the chart's tensorboard.serviceTypes):
    # NodePort and LoadBalancer put a job's TensorBoard outside the cluster.
    tensorboard_service_types: tuple[str, ...] = ("ClusterIP",)
    # Set when the autoscaler runs beside the controller (see Admission).
    # Not a chart value: it follows the autoscaler, which alone admits jobs.
    admission: Admission | None = field(default=None, compare=False)


def load_config(path: str | Path | None) -> ControllerConfig:
    """Read the config file and the gRPC server script it points at.

    No path gives the defaults. A relative grpcServerFilePath is taken
    relative to the config file's directory, so a checkout can run as is.
    """
    if path is None:
        return ControllerConfig()
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    config = parse_config(data)
    if not config.grpc_server_file_path:
        return config
    script_path = path.parent / config.grpc_server_file_path
    try:
        script = script_path.read_text(encoding="utf-8")
    except OSError as err:
        return _with_script(config, "", f"cannot read grpcServerFilePath {script_path}: {err}")
    return _with_script(config, script, "")


def _with_script(config: ControllerConfig, script: str, error: str) -> ControllerConfig:
    return replace(config, grpc_server_script=script, grpc_server_error=error)


def parse_config(data: object, grpc_server_script: str = "") -> ControllerConfig:
    """The config from the file's parsed YAML (None for an empty file)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("controller config: must be a mapping")
    raw_accelerators = data.get("accelerators")
    if raw_accelerators is None:
        raw_accelerators = {}
    if not isinstance(raw_accelerators, dict):
        raise ConfigError("accelerators: must be a mapping of resource name to settings")
    options = {
        key: raw_accelerators[key]
        for key in _OPTIONS_TOLERATED_IN_ACCELERATORS
        if isinstance(raw_accelerators.get(key), str)
    }
    options.update({key: data[key] for key in _OPTIONS_TOLERATED_IN_ACCELERATORS if key in data})
    accelerators = {
        name: _accelerator(name, value)
        for name, value in raw_accelerators.items()
        if not (name in _OPTIONS_TOLERATED_IN_ACCELERATORS and isinstance(value, str))
    }
    file_path = _option_str(options, "grpcServerFilePath", "")
    images = _images(data.get("images"))
    return ControllerConfig(
        accelerators=MappingProxyType(accelerators),
        tf_image=_option_str(options, "tfImage", DEFAULT_TF_IMAGE) or DEFAULT_TF_IMAGE,
        redis_image=images["redis"],
        etcd_image=images["etcd"],
        grpc_server_file_path=file_path,
        grpc_server_script=grpc_server_script,
        grpc_server_error="" if grpc_server_script else _NO_SCRIPT,
    )


def _images(value: object) -> dict[str, str]:
    """`images: {redis, etcd}`; a key left out (or null) keeps its default.

    An unknown key is an error, so that a misspelt one fails at start-up
    instead of leaving the default image in every pod.
    """
    images = {"redis": DEFAULT_REDIS_IMAGE, "etcd": DEFAULT_ETCD_IMAGE}
    if value is None:
        return images
    if not isinstance(value, dict):
        raise ConfigError("images: must be a mapping of container to image, e.g. {redis: ...}")
    for key, image in value.items():
        if key not in images:
            raise ConfigError(f"images.{key}: not an image the operator sets (known: etcd, redis)")
        if image is None:
            continue
        if not isinstance(image, str) or not image:
            raise ConfigError(f"images.{key}: must be a non-empty string")
        images[key] = image
    return images


def _option_str(options: dict[str, Any], key: str, default: str) -> str:
    value = options.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ConfigError(f"{key}: must be a string")
    return value


def _accelerator(resource: str, value: object) -> Accelerator:
    where = f"accelerators[{resource!r}]"
    if value is None:
        return Accelerator()
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a mapping with volumes and envVars")
    volumes = tuple(
        _volume(f"{where}.volumes[{i}]", item)
        for i, item in enumerate(_optional_list(where, value, "volumes"))
    )
    env_vars = tuple(
        _env_var(f"{where}.envVars[{i}]", item)
        for i, item in enumerate(_optional_list(where, value, "envVars"))
    )
    return Accelerator(volumes=volumes, env_vars=env_vars)


def _optional_list(where: str, value: dict[str, Any], key: str) -> list[Any]:
    items = value.get(key)
    if items is None:
        return []
    if not isinstance(items, list):
        raise ConfigError(f"{where}.{key}: must be a list")
    return items


# Kubernetes' HostPathType values (core/v1 types.go).
HOST_PATH_TYPES: Final = (
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
)


def _volume(where: str, item: object) -> AcceleratorVolume:
    fields = _required_strings(where, item, ("name", "mountPath", "hostPath"))
    kind = item.get("type", "") if isinstance(item, dict) else ""
    if kind not in HOST_PATH_TYPES:
        raise ConfigError(f"{where}.type: must be one of {', '.join(HOST_PATH_TYPES[1:])}")
    return AcceleratorVolume(fields[0], fields[1], fields[2], host_path_type=str(kind))


def _env_var(where: str, item: object) -> tuple[str, str]:
    (name,) = _required_strings(where, item, ("name",))
    value = item.get("value", "") if isinstance(item, dict) else ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError(f"{where}.value: must be a string")
    # YAML reads `value: 1` as a number; a container env value is a string.
    return name, str(value)


def _required_strings(where: str, item: object, keys: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: must be a mapping")
    for key in keys:
        if not isinstance(item.get(key), str) or not item[key]:
            raise ConfigError(f"{where}.{key}: must be a non-empty string")
    return tuple(item[key] for key in keys)
