"""Where the images' Debian packages come from: the mirror this machine's apt
is configured with (/etc/apt/sources.list*), for its own release or another."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from .image import ImageError


def os_codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"')
    raise ImageError("no VERSION_CODENAME in /etc/os-release")


def _apt_source_files() -> list[Path]:
    files = [Path("/etc/apt/sources.list")]
    d = Path("/etc/apt/sources.list.d")
    if d.is_dir():
        files += sorted(p for p in d.iterdir() if p.suffix in (".list", ".sources"))
    return [f for f in files if f.is_file()]


def _parse_sources(path: Path) -> Iterator[tuple[str, str, list[str]]]:
    """(uri, suite, components) of every `deb` entry of one apt sources file."""
    text = path.read_text()
    if path.suffix == ".sources":  # deb822 stanzas
        for stanza in re.split(r"\n\s*\n", text):
            fields: dict[str, str] = {}
            key = ""
            for line in stanza.splitlines():
                if line.startswith("#") or not line.strip():
                    continue
                if line[0].isspace() and key:
                    fields[key] += " " + line.strip()
                    continue
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
            if "deb" not in fields.get("types", "").split():
                continue
            if fields.get("enabled", "yes").lower() == "no":
                continue
            for uri in fields.get("uris", "").split():
                for suite in fields.get("suites", "").split():
                    yield uri, suite, fields.get("components", "main").split()
    else:  # one-line format: deb [options] uri suite component...
        for line in text.splitlines():
            line = re.sub(r"\[[^]]*\]", "", line.split("#", 1)[0]).split()  # type: ignore[assignment]
            if len(line) >= 3 and line[0] == "deb":
                yield line[1], line[2], list(line[3:]) or ["main"]


def debian_sources(codename: str | None = None) -> list[str]:
    """sources.list lines for the configured Debian mirror of a release.

    Only the suites of this machine's release (e.g. bookworm,
    bookworm-updates, bookworm-security) and only component main; other
    repositories that apt may have configured are left out. Another release
    (``codename``, e.g. trixie for the PyTorch image) comes from the same
    mirrors: its suites are this release's, renamed (trixie, trixie-updates,
    trixie-security), since a Debian mirror carries every release.
    """
    host = os_codename()
    codename = codename or host
    lines: list[str] = []
    for path in _apt_source_files():
        for uri, suite, components in _parse_sources(path):
            if suite != host and not suite.startswith(f"{host}-"):
                continue
            if "main" not in components:
                continue
            line = f"deb {uri} {codename}{suite[len(host) :]} main"
            if line not in lines:
                lines.append(line)
    if not any(line.split()[2] == codename for line in lines):
        raise ImageError(f"no Debian mirror for {codename} in /etc/apt/sources.list*")
    return lines
