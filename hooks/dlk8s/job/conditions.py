"""A job's status.conditions: read leniently, set so that an unchanged job keeps an identical list.

One condition per type, in CONDITION_ORDER. Times move only when something
changed, and lastTransitionTime only when the status flips, so a pass that
changes nothing writes nothing.
"""

from __future__ import annotations

from typing import Final, cast

from dlk8s.job.objects import Condition, as_list
from dlk8s.job.vocabulary import CONDITION_ORDER, ConditionType

_RANK: Final = {type_: i for i, type_ in enumerate(CONDITION_ORDER)}


def clean_conditions(value: object) -> list[Condition]:
    """Conditions of a previous status that are usable, one per type."""
    seen: dict[str, Condition] = {}
    for item in as_list(value):
        if (
            isinstance(item, dict)
            and isinstance(item.get("type"), str)
            and item["type"] not in seen
        ):
            seen[item["type"]] = cast(Condition, dict(item))
    return _ordered(list(seen.values()))


def has_condition(conditions: list[Condition], type_: str) -> bool:
    return any(c.get("type") == type_ for c in conditions)


def condition_of(conditions: list[Condition] | list[object], type_: str) -> Condition:
    """The condition of `type_`, or an empty one."""
    for item in conditions:
        if isinstance(item, dict) and item.get("type") == type_:
            return cast(Condition, item)
    return cast(Condition, {})


def set_condition(
    conditions: list[Condition], type_: str, status: bool, reason: str, message: str, now: str
) -> list[Condition]:
    """The list with `type_` set; times move only when something changed, and
    lastTransitionTime only when the status flips, so an unchanged job keeps
    an identical list (and no status write)."""
    value = "True" if status else "False"
    old = next((c for c in conditions if c.get("type") == type_), None)
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
        value,
        reason,
        message,
    ):
        return conditions
    transition = (
        now if old is None or old.get("status") != value else old.get("lastTransitionTime", now)
    )
    new = Condition(
        type=type_,
        status=value,
        reason=reason,
        message=message,
        lastTransitionTime=transition,
        lastUpdateTime=now,
    )
    return _ordered([c for c in conditions if c.get("type") != type_] + [new])


def clear_condition(
    conditions: list[Condition], type_: str, reason: str, message: str, now: str
) -> list[Condition]:
    """Set `type_` to False, but only if it was ever set: a job that never
    restarted shows no Restarting condition at all."""
    if not has_condition(conditions, type_):
        return conditions
    return set_condition(conditions, type_, False, reason, message, now)


def finished_conditions(
    conditions: list[Condition], succeeded: bool, reason: str, message: str, now: str
) -> list[Condition]:
    """The list of a job that has just finished: Succeeded (or Failed) set
    with the verdict's reason and message, Running and Restarting cleared."""
    type_ = ConditionType.SUCCEEDED if succeeded else ConditionType.FAILED
    conditions = set_condition(conditions, type_, True, reason, message, now)
    done = "The job has finished"
    conditions = clear_condition(conditions, ConditionType.RUNNING, reason, done, now)
    return clear_condition(conditions, ConditionType.RESTARTING, reason, done, now)


def _ordered(conditions: list[Condition]) -> list[Condition]:
    return sorted(conditions, key=lambda c: _RANK.get(c["type"], len(_RANK)))
