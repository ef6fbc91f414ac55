"""How the reports write a figure, a ratio and a count of requests."""

from __future__ import annotations

from typing import Any


def without_series(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_series(v) for k, v in value.items() if not k.startswith("series")}
    return value


def fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
    else:
        text = str(value)
    return text + unit


def time_ratio(op: Any, ceiling: Any) -> str:
    if not isinstance(op, int | float) or not isinstance(ceiling, int | float) or not ceiling:
        return "-"
    return f"{op / ceiling:.2f}x (speed {ceiling / op:.2f})" if op else "-"


def div(a: Any, b: Any) -> float | None:
    return a / b if isinstance(a, int | float) and isinstance(b, int | float) and b else None


def verbs(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"
