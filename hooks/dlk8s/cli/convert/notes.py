"""What a conversion tells its user: one note for every field it changed or dropped."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Note:
    """One field the conversion changed or dropped, or why a job is refused."""

    # The file and the job (or document) the note is about.
    where: str
    # The field's path and what happened to it.
    message: str

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"


class Notes:
    """Collects the notes of one document, each prefixed with where it came from."""

    def __init__(self, out: list[Note], where: str) -> None:
        # The notes of the whole file, in the order they were told.
        self._out = out
        # The file and the job every note of this document names.
        self.where = where

    def __call__(self, path: str, message: str) -> None:
        self._out.append(Note(self.where, f"{path}: {message}" if path else message))
