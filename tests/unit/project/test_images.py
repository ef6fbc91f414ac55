"""Where the images' Debian packages come from (dev/dlk8s_dev/images/sources.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlk8s_dev import images
from dlk8s_dev.images import sources

SOURCES = """\
Types: deb
URIs: http://mirror.invalid/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb
URIs: http://mirror.invalid/debian-security
Suites: bookworm-security
Components: main
"""
OTHER = "deb http://elsewhere.invalid/apt cloud-sdk-bookworm main\n"


@pytest.fixture
def apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "debian.sources").write_text(SOURCES)
    (tmp_path / "other.list").write_text(OTHER)
    files = [tmp_path / "debian.sources", tmp_path / "other.list"]
    monkeypatch.setattr(sources, "_apt_source_files", lambda: files)
    monkeypatch.setattr(sources, "os_codename", lambda: "bookworm")


@pytest.mark.usefixtures("apt")
def test_this_release_comes_from_the_configured_mirror() -> None:
    assert images.debian_sources() == [
        "deb http://mirror.invalid/debian bookworm main",
        "deb http://mirror.invalid/debian bookworm-updates main",
        "deb http://mirror.invalid/debian-security bookworm-security main",
    ]


@pytest.mark.usefixtures("apt")
def test_another_release_comes_from_the_same_mirror_with_its_suites_renamed() -> None:
    assert images.debian_sources("trixie") == [
        "deb http://mirror.invalid/debian trixie main",
        "deb http://mirror.invalid/debian trixie-updates main",
        "deb http://mirror.invalid/debian-security trixie-security main",
    ]


def test_the_pytorch_image_pins_a_pytorch_2_of_debian_13() -> None:
    codename, *packages = images.pytorch_packages()
    assert codename == "trixie"
    [torch] = [p for p in packages if p.startswith("python3-torch")]
    name, version = torch.split("=")
    assert name == "python3-torch"
    assert version.split(".")[0] == "2", version
