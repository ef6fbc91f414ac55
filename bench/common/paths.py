"""Where bench keeps its files: the package's own folder (the elastic
traces, bench/elastic-trace*.json) and the results (bench/results/), found
from this file, wherever bench is run from."""

from __future__ import annotations

from pathlib import Path

BENCH = Path(__file__).resolve().parents[1]
RESULTS = BENCH / "results"
