"""YAML read as the seeds' users have it: what a strict reader refuses is
repaired the way its author meant, and each repair is told.

The MXNet fork's README published its GPU example with aliases used before
their anchors and anchors on empty values; `load_documents` reads such a file
in two passes (every anchor's definitions first, then the documents).
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent, ScalarEvent
from yaml.nodes import Node, ScalarNode


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
        # The document being composed: anchors never reach across documents.
        self.document = -1
        # Every node an anchor marks, by document and name, in the file's order.
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
        # Each anchor's real (non-empty) definition, by document and name, from the scout.
        self._all_content = content
        # The same for the document being composed.
        self._content: dict[str, Node] = {}
        # The document being composed.
        self._document = -1
        # Where the repairs are told, one line each.
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
