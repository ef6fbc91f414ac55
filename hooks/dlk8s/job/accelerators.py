"""GPU driver injection, from the controller config's `accelerators`.

Every container that requests or limits a configured resource (e.g.
nvidia.com/gpu, or the seeds' alpha.kubernetes.io/nvidia-gpu) gets that
resource's hostPath volumes, mounts and environment variables. Cloud images
without the drivers baked in need them; what the user set wins.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from dlk8s.job.api import Obj, as_dict, as_list, as_str
from dlk8s.job.config import Accelerator, AcceleratorVolume
from dlk8s.job.env import add_env_defaults


def inject_accelerators(pod_spec: Obj, accelerators: Mapping[str, Accelerator]) -> None:
    """Mutates `pod_spec`, which must be the caller's own copy."""
    for container in _containers(pod_spec):
        for resource in _requested(container):
            accelerator = accelerators.get(resource)
            if accelerator is None:
                continue
            add_env_defaults(container, accelerator.env_vars)
            _add_mounts(container, accelerator.volumes)
            _add_host_paths(pod_spec, accelerator.volumes)


def _containers(pod_spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers"):
        for container in as_list(pod_spec.get(key)):
            if isinstance(container, dict):
                yield container


def _requested(container: Obj) -> list[str]:
    resources = as_dict(container.get("resources"))
    names: dict[str, None] = {}  # ordered, deduplicated
    for key in ("limits", "requests"):
        names.update(dict.fromkeys(as_dict(resources.get(key))))
    return list(names)


def _add_mounts(container: Obj, volumes: tuple[AcceleratorVolume, ...]) -> None:
    mounts = list(as_list(container.get("volumeMounts")))
    names = {as_str(m.get("name")) for m in mounts if isinstance(m, dict)}
    paths = {as_str(m.get("mountPath")) for m in mounts if isinstance(m, dict)}
    for volume in volumes:
        if volume.name in names or volume.mount_path in paths:
            continue
        mounts.append({"name": volume.name, "mountPath": volume.mount_path})
        names.add(volume.name)
        paths.add(volume.mount_path)
    if mounts:
        container["volumeMounts"] = mounts


def _add_host_paths(pod_spec: Obj, volumes: tuple[AcceleratorVolume, ...]) -> None:
    existing = list(as_list(pod_spec.get("volumes")))
    names = {as_str(v.get("name")) for v in existing if isinstance(v, dict)}
    for volume in volumes:
        if volume.name not in names:
            existing.append({"name": volume.name, "hostPath": {"path": volume.host_path}})
            names.add(volume.name)
    if existing:
        pod_spec["volumes"] = existing
