"""The operator's package and the examples' programs keep the shape every
package of the repository keeps (tests/unit/support/codeshape.py): no module
over 500 lines, no function over 60, and no import circle in hooks/dlk8s.
bench/ and dev/ have tests of their own, which check more of their layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..support.codeshape import circles, import_graph, long_functions, long_modules, modules

REPO = Path(__file__).resolve().parents[3]
OPERATOR = REPO / "hooks" / "dlk8s"
EXAMPLES = REPO / "examples"


@pytest.mark.parametrize("root", [OPERATOR, EXAMPLES], ids=["hooks", "examples"])
def test_no_module_over_500_lines_and_no_function_over_60(root: Path) -> None:
    assert len(modules(root)) > 3
    assert long_modules(root) == []
    assert long_functions(root) == []


def test_the_operator_has_no_import_circle() -> None:
    graph = import_graph(OPERATOR)
    assert circles(graph) == []
    # The graph sees the package: reconcile walks the queued path.
    assert "dlk8s.job.reconcile.queued" in graph["dlk8s.job.reconcile.active"]
