"""The checkout's tool chain as the local cluster sees it: where `make tools`
links the binaries, which of them the control plane needs, and the versions
tools/versions.env pins."""

from __future__ import annotations

from pathlib import Path

# dev/dlk8s_dev/localcluster/ is three folders below the checkout.
REPO_ROOT = Path(__file__).resolve().parents[3]
DEFAULT_TOOLS_BIN = REPO_ROOT / ".tools" / "bin"
VERSIONS_FILE = REPO_ROOT / "tools" / "versions.env"

REQUIRED_TOOLS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
)


def missing_tools(tools_bin: Path = DEFAULT_TOOLS_BIN) -> list[str]:
    return [t for t in REQUIRED_TOOLS if not (tools_bin / t).exists()]


def pinned_versions(path: Path = VERSIONS_FILE) -> dict[str, str]:
    pairs = (
        line.split("=", 1)
        for line in path.read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    return {k.strip(): v.strip() for k, v in pairs}
