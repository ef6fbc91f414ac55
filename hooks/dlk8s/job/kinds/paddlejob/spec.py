"""PaddleJob's spec: its vocabulary, how it is read and how it is checked.

Reading is lenient (the autoscaler and the status read jobs that may not be
valid); `validate` is the Kind's. What a PaddleJob is: docs/kinds.md.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Final

from dlk8s.job.kinds.elastic import CountAnnotations
from dlk8s.job.kinds.paddlejob.templates import role_template, template_problems
from dlk8s.job.objects import Obj, as_dict, as_int, as_list, dig, is_int
from dlk8s.job.validation import (
    int_between,
    optional_object,
    port_problems,
    resources_problems,
)
from dlk8s.job.vocabulary import MAX_REPLICAS

KIND: Final = "PaddleJob"
MASTER: Final = "MASTER"
PSERVER: Final = "PSERVER"
TRAINER: Final = "TRAINER"
CONTAINER: Final = "paddle"  # the main container, in every role
PORT_NAME: Final = "paddle-port"

DEFAULT_PORT: Final = 7164
DEFAULT_PORTS_NUM: Final = 1
DEFAULT_PORTS_NUM_FOR_SPARSE: Final = 0  # the CRD's default
DEFAULT_PASSES: Final = 1

ANNOTATION_TRAINERS: Final = "dlk8s.io/trainers"
ANNOTATION_TRAINERS_REASON: Final = "dlk8s.io/trainers-reason"
TRAINERS: Final = CountAnnotations(
    count=ANNOTATION_TRAINERS,
    reason=ANNOTATION_TRAINERS_REASON,
    noun="trainers",
    default="trainer.minInstance",
    bounds="minInstance..maxInstance",
)


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
    return TRAINERS.requested(job)


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
    and what a user may write by hand, as the job's annotations carry it
    (elastic.CountAnnotations: the reason only ever shown with its count)."""

    trainers: int
    reason: str

    def annotations(self) -> dict[str, str]:
        return TRAINERS.annotations(self.trainers, self.reason)

    @staticmethod
    def reason_on(job: object, count: int) -> str | None:
        """The reason the job's annotation gives for `count`, if it gives one."""
        return TRAINERS.reason_on(job, count)


def scale_reason(job: object, count: int) -> str:
    """Why the job runs `count` trainers, for status and events."""
    return TRAINERS.explain(job, count)


def sizing_spec(job: object, role: str) -> Obj:
    """What the autoscaler sizes and places a role's pod by: the template's
    pod spec, its main container given spec.<role>.resources as the built
    pod has it."""
    spec = copy.deepcopy(as_dict(role_template(job, role).get("spec")))
    resources = as_dict(dig(job, "spec", role.lower(), "resources"))
    main: Obj = {"name": CONTAINER, "resources": copy.deepcopy(resources)}
    others = [c for c in as_list(spec.get("containers")) if dig(c, "name") != CONTAINER]
    spec["containers"] = [main, *others]
    return spec


def fault_tolerant(job: Obj) -> bool:
    return dig(job, "spec", "faultTolerant") is True


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
            as_int(spec.get("port"), DEFAULT_PORT)
            + as_int(spec.get("portsNum"), DEFAULT_PORTS_NUM)
            + as_int(spec.get("portsNumForSparse"), DEFAULT_PORTS_NUM_FOR_SPARSE)
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
    problems += optional_object("spec.master", spec.get("master"), _master_problems)
    if dig(spec, "pserver", "minInstance") == 0 and not fault_tolerant(job):
        problems.append(
            "spec.pserver.minInstance: may be 0 only in a fault-tolerant job"
            " (one that is not trains with Fleet's parameter servers)"
        )
    if is_elastic(job) and not fault_tolerant(job):
        problems.append(
            "spec.faultTolerant: must be true when spec.trainer.minInstance is below"
            " maxInstance (only a fault-tolerant job survives losing trainers when scaled down)"
        )
    return problems


def _master_problems(path: str, master: Obj) -> list[str]:
    problems = resources_problems(f"{path}.resources", master.get("resources"))
    return problems + _template_problems(path, master, master=True)


def _template_problems(path: str, block: Obj, master: bool = False) -> list[str]:
    return optional_object(
        f"{path}.template",
        block.get("template"),
        lambda where, template: template_problems(where, template, CONTAINER, master),
    )


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
    problems += resources_problems(f"{path}.resources", trainer.get("resources"))
    return problems + _template_problems(path, trainer)


def _pserver_problems(pserver: object) -> list[str]:
    path = "spec.pserver"
    if not isinstance(pserver, dict):
        return [f"{path}: must be an object"]
    problems = _bounds_problems(path, pserver, lowest=0)
    low, high = pserver.get("minInstance"), pserver.get("maxInstance")
    if not problems and low != high:
        problems.append(
            f"{path}.maxInstance: must equal {path}.minInstance (pservers do not scale)"
        )
    problems += resources_problems(f"{path}.resources", pserver.get("resources"))
    return problems + _template_problems(path, pserver)


def _bounds_problems(path: str, block: Obj, lowest: int = 1) -> list[str]:
    problems = []
    for key in ("minInstance", "maxInstance"):
        value = block.get(key)
        if value is None:
            problems.append(f"{path}.{key}: is required")
        else:
            problems += int_between(f"{path}.{key}", value, lowest, MAX_REPLICAS)
    return problems
