"""What `make publish` decides before it pushes (dlk8s_dev.release).

The pushes themselves run against a real registry in
tests/e2e/realnode/test_publish.py; here: which versions and registries it accepts,
which registries it speaks plain HTTP to, the packaged chart it pins to the
pushed digest, and the login file it writes and removes.
"""

from __future__ import annotations

import base64
import io
import json
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from dlk8s_dev import release
from dlk8s_dev.release import ReleaseError

ROOT = Path(__file__).resolve().parents[3]
VALUES = ROOT / "charts" / "dlk8s" / "values.yaml"
DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize("version", ["0.3.0", "0.3.0-rc.1", "0.3.0+build.7"])
def test_a_release_is_the_recorded_version_or_a_pre_release_of_it(version: str) -> None:
    release.check_version(version, "0.3.0")


@pytest.mark.parametrize("version", ["0.3.1", "0.2.0", "0.3.0rc1", "v0.3.0", "0.3"])
def test_any_other_version_is_refused(version: str) -> None:
    with pytest.raises(ReleaseError, match="VERSION"):
        release.check_version(version, "0.3.0")


@pytest.mark.parametrize(
    "registry",
    ["ghcr.io", "ghcr.io/dlk8s", "127.0.0.1:5000", "registry.example.com:5000/a/b", "[::1]:5000"],
)
def test_registries_are_host_port_and_path(registry: str) -> None:
    release.check_registry(registry)


@pytest.mark.parametrize(
    "registry", ["https://ghcr.io", "ghcr.io/", "ghcr.io/Dlk8s", "ghcr.io:port", ""]
)
def test_a_scheme_or_a_bad_path_is_refused(registry: str) -> None:
    with pytest.raises(ReleaseError, match="host\\[:port\\]\\[/path\\]"):
        release.check_registry(registry)


@pytest.mark.parametrize(
    ("registry", "plain"),
    [
        ("127.0.0.1:5000", True),
        ("127.8.9.10:5000/x", True),
        ("localhost:5000", True),
        ("localhost", True),
        ("[::1]:5000", True),
        ("ghcr.io", False),
        ("10.0.0.1:5000", False),
        ("localhost.example.com:5000", False),
    ],
)
def test_only_loopback_registries_are_spoken_to_over_plain_http(registry: str, plain: bool) -> None:
    assert release.plain_http(registry) is plain


def test_where_each_part_goes() -> None:
    assert (
        release.image_repository("r.example:5000/p", "operator")
        == "r.example:5000/p/dlk8s/operator"
    )
    assert release.image_repository("ghcr.io", "runtime") == "ghcr.io/dlk8s/runtime"
    assert release.chart_reference("ghcr.io") == "oci://ghcr.io/dlk8s/charts/dlk8s"


def test_set_image_pins_the_operator_and_keeps_every_comment() -> None:
    before = VALUES.read_text()
    after = release.set_image(before, "127.0.0.1:5000/dlk8s/operator", DIGEST)
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    assert new["image"]["repository"] == "127.0.0.1:5000/dlk8s/operator"
    assert new["image"]["digest"] == DIGEST
    assert new["image"]["repository"] != old["image"]["repository"]
    # Nothing else changed: the same values, the same lines but two.
    for key in ("repository", "digest"):
        del old["image"][key], new["image"][key]
    assert new == old
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert [b.split(":")[0] for _, b in changed] == ["  repository", "  digest"]


def test_set_image_refuses_values_without_the_image_block() -> None:
    with pytest.raises(ReleaseError, match="image"):
        release.set_image("replicaCount: 1\n", "r/x", DIGEST)
    # A nested `image:` (a job's) is not the operator's.
    with pytest.raises(ReleaseError, match="image"):
        release.set_image("tests:\n  image:\n    repository: x\n", "r/x", DIGEST)


def test_the_login_file_names_the_registry_host_and_goes_away() -> None:
    env = {"REGISTRY_USER": "robot", "REGISTRY_PASSWORD": "s3cret"}
    with release.credentials("ghcr.io/dlk8s", env) as path:
        assert path is not None
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        auths = json.loads(path.read_text())["auths"]
        assert list(auths) == ["ghcr.io"]
        assert base64.b64decode(auths["ghcr.io"]["auth"]) == b"robot:s3cret"
    assert not path.exists()


def test_no_login_uses_the_users_own_and_half_a_login_is_refused() -> None:
    with release.credentials("ghcr.io", {}) as path:
        assert path is None
    with (
        pytest.raises(ReleaseError, match="both"),
        release.credentials("ghcr.io", {"REGISTRY_USER": "robot"}),
    ):
        pass


def _oci_archive(path: Path, manifests: list[dict[str, str]]) -> Path:
    index = json.dumps({"schemaVersion": 2, "manifests": manifests}).encode()
    with tarfile.open(path, "w") as tar:
        member = tarfile.TarInfo("index.json")
        member.size = len(index)
        tar.addfile(member, io.BytesIO(index))
    return path


def test_the_digest_of_an_archive_is_its_one_manifest(tmp_path: Path) -> None:
    one = _oci_archive(tmp_path / "one.tar", [{"digest": DIGEST}])
    assert release.archive_digest(one) == DIGEST
    two = _oci_archive(tmp_path / "two.tar", [{"digest": DIGEST}, {"digest": DIGEST}])
    with pytest.raises(ReleaseError, match="2 images"):
        release.archive_digest(two)


def test_the_repackaged_chart_pins_the_digest_and_keeps_its_version(tmp_path: Path) -> None:
    helm = ROOT / ".tools" / "bin" / "helm"
    if not helm.exists():
        pytest.skip("helm missing: `make tools` installs it into .tools/bin")
    subprocess.run(
        [str(helm), "package", str(ROOT / "charts" / "dlk8s"), "--destination", str(tmp_path),
         "--version", "9.8.7", "--app-version", "9.8.7"],
        check=True, capture_output=True,
    )  # fmt: skip
    chart = release.chart_archive(tmp_path, "9.8.7")
    out = release.repackage_chart(
        chart, "r.example/dlk8s/operator", DIGEST, tmp_path / "out", str(helm)
    )
    assert out == tmp_path / "out" / "dlk8s-9.8.7.tgz"
    with tarfile.open(out) as tar:
        values = yaml.safe_load(tar.extractfile("dlk8s/values.yaml").read())  # type: ignore[union-attr]
        meta = yaml.safe_load(tar.extractfile("dlk8s/Chart.yaml").read())  # type: ignore[union-attr]
    assert values["image"]["repository"] == "r.example/dlk8s/operator"
    assert values["image"]["digest"] == DIGEST
    assert (meta["version"], meta["appVersion"]) == ("9.8.7", "9.8.7")
