"""GPU driver injection, from the controller config's `accelerators`.

Every container that asks for a configured resource (e.g. nvidia.com/gpu,
or the seeds' alpha.kubernetes.io/nvidia-gpu), i.e. requests or limits more
than zero of it, gets that resource's hostPath volumes, mounted read-only,
and its environment variables. Cloud images without the drivers baked in
need them; what the user set wins:

- a variable the container sets itself is left as it is;
- a path the container mounts something at itself gets no driver mount;
- a pod volume of the user's that happens to carry a configured volume's
  name (the azure preset's legacy entry calls its volumes `lib` and `bin`)
  stays the user's: the driver's hostPath volume gets a free name instead of
  hijacking it.

Other containers of the pod (sidecars, the containers the operator adds)
get nothing.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping

from dlk8s.job.computeresources import parse_quantity
from dlk8s.job.config import Accelerator, AcceleratorVolume
from dlk8s.job.env import add_env_defaults
from dlk8s.job.objects import Obj, as_dict, as_list, as_str

# Kubernetes volume names are DNS labels.
_MAX_NAME = 63


def inject_accelerators(pod_spec: Obj, accelerators: Mapping[str, Accelerator]) -> None:
    """Mutates `pod_spec`, which must be the caller's own copy."""
    for container in _containers(pod_spec):
        for resource in _requested(container):
            accelerator = accelerators.get(resource)
            if accelerator is None:
                continue
            add_env_defaults(container, accelerator.env_vars)
            for volume in accelerator.volumes:
                _mount(pod_spec, container, volume)


def _containers(pod_spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers"):
        for container in as_list(pod_spec.get(key)):
            if isinstance(container, dict):
                yield container


def _requested(container: Obj) -> list[str]:
    """Resources the container asks for: more than zero in its limits or requests.

    `nvidia.com/gpu: 0` is how templated charts say "no GPU"; such a
    container must not get driver mounts (on a node without the driver the
    runtime would create the missing host paths as empty directories).
    A quantity that does not parse counts as asked for: the API server
    refuses it anyway, and nothing is silently dropped.
    """
    resources = as_dict(container.get("resources"))
    names: dict[str, None] = {}  # ordered, deduplicated
    for key in ("limits", "requests"):
        for name, value in as_dict(resources.get(key)).items():
            quantity = parse_quantity(value)
            if quantity is None or quantity > 0:
                names[name] = None
    return list(names)


def _mount(pod_spec: Obj, container: Obj, volume: AcceleratorVolume) -> None:
    """Mount the driver read-only unless the container mounts something at that path.

    Read-only: the hostPath is the node's own driver install, shared by
    every GPU pod there; a job must not be able to change it.
    """
    mounts = list(as_list(container.get("volumeMounts")))
    taken = {_norm(as_str(m.get("mountPath"))) for m in mounts if isinstance(m, dict)}
    if _norm(volume.mount_path) in taken:
        return
    name = _host_path_volume(pod_spec, volume)
    mounts.append({"name": name, "mountPath": volume.mount_path, "readOnly": True})
    container["volumeMounts"] = mounts


def _host_path_volume(pod_spec: Obj, volume: AcceleratorVolume) -> str:
    """The name of the pod volume for `volume`'s hostPath, added when missing.

    A pod volume of that name that is not this hostPath belongs to someone
    else (the user, or another resource's entry with the same name): ours
    then gets the first free `<name>-<n>`.
    """
    volumes = list(as_list(pod_spec.get("volumes")))
    by_name = {as_str(v.get("name")): v for v in volumes if isinstance(v, dict)}
    source = {"path": volume.host_path}
    if volume.host_path_type:
        source["type"] = volume.host_path_type
    name, n = volume.name, 1
    while name in by_name:
        if as_dict(by_name[name].get("hostPath")) == source:
            return name
        n += 1
        suffix = f"-{n}"
        name = volume.name[: _MAX_NAME - len(suffix)] + suffix
    volumes.append({"name": name, "hostPath": source})
    pod_spec["volumes"] = volumes
    return name


def _norm(path: str) -> str:
    """`/usr/local/nvidia/` and `/usr/local/nvidia` are one mount point."""
    return posixpath.normpath(path) if path else path
