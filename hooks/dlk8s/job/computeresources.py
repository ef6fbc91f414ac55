"""Compute resources as the scheduler counts them: CPU, memory and GPUs.

Quantities are parsed from the API's strings ("200m", "1Gi", "2") into
integers: CPU in millicores, memory in bytes, GPUs as a count. A pod's
request is what the scheduler reserves for it: the larger of its containers'
sum and its largest init container, plus the pod overhead. Requests that are
not given default to the limits, as the API server defaults them.

Everything here is pure and lenient: an unparsable quantity counts as zero
(validation reports it separately where it matters).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Final

from dlk8s.job.objects import as_dict, as_list

CPU: Final = "cpu"
MEMORY: Final = "memory"
GPU: Final = "nvidia.com/gpu"
# The seeds' examples still use the pre-device-plugin name.
LEGACY_GPU: Final = "alpha.kubernetes.io/nvidia-gpu"
GPU_NAMES: Final = (GPU, LEGACY_GPU)

_QUANTITY: Final = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?$"
)
_SUFFIX: Final[Mapping[str, Decimal]] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


def parse_quantity(value: object) -> Decimal | None:
    """A Kubernetes quantity ("200m", "1Gi", 2, "1e3") as a Decimal; None if invalid."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY.match(value.strip())
    if match is None:
        return None
    number, suffix = match.group(1), match.group(2) or ""
    try:
        if suffix[:1] in ("e", "E"):
            return Decimal(number) * Decimal(10) ** int(suffix[1:])
        return Decimal(number) * _SUFFIX[suffix]
    except (InvalidOperation, OverflowError, ValueError):
        return None


def is_quantity(value: object) -> bool:
    parsed = parse_quantity(value)
    return parsed is not None and parsed >= 0


def _milli(value: object) -> int:
    parsed = parse_quantity(value)
    if parsed is None or parsed < 0:
        return 0
    return int((parsed * 1000).to_integral_value(rounding=ROUND_CEILING))


def _whole(value: object) -> int:
    parsed = parse_quantity(value)
    if parsed is None or parsed < 0:
        return 0
    return int(parsed.to_integral_value(rounding=ROUND_CEILING))


@dataclass(frozen=True, order=True, slots=True)
class Resources:
    """CPU in millicores, memory in bytes, GPUs as a count."""

    cpu: int = 0
    memory: int = 0
    gpu: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu + other.cpu, self.memory + other.memory, self.gpu + other.gpu)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu - other.cpu, self.memory - other.memory, self.gpu - other.gpu)

    def fits_in(self, room: Resources) -> bool:
        return self.cpu <= room.cpu and self.memory <= room.memory and self.gpu <= room.gpu

    def max(self, other: Resources) -> Resources:
        return Resources(
            max(self.cpu, other.cpu), max(self.memory, other.memory), max(self.gpu, other.gpu)
        )


def from_list(items: object) -> Resources:
    """A ResourceList ({"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": 1})."""
    items = as_dict(items)
    gpu = next((items[name] for name in GPU_NAMES if name in items), None)
    return Resources(_milli(items.get(CPU)), _whole(items.get(MEMORY)), _whole(gpu))


def container_requests(container: object) -> Resources:
    """What the scheduler reserves for one container: requests, else limits."""
    resources = as_dict(as_dict(container).get("resources"))
    limits = as_dict(resources.get("limits"))
    requests = as_dict(resources.get("requests"))
    return from_list(limits | requests)


def pod_requests(pod_spec: object) -> Resources:
    spec = as_dict(pod_spec)
    total = Resources()
    for container in as_list(spec.get("containers")):
        total = total + container_requests(container)
    for container in as_list(spec.get("initContainers")):
        total = total.max(container_requests(container))
    return total + from_list(spec.get("overhead"))


def gpu_count(resources: object) -> int:
    """GPUs a ResourceRequirements asks for (limits, else requests)."""
    resources = as_dict(resources)
    merged = as_dict(resources.get("requests")) | as_dict(resources.get("limits"))
    return from_list(merged).gpu


def cpu_cores(resources: object) -> Decimal:
    """CPU cores a ResourceRequirements asks for (requests, else limits)."""
    return Decimal(container_requests({"resources": resources}).cpu) / 1000
