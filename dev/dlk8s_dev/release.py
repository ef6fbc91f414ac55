"""A release: what `make release` writes into dist/ and what `make publish` pushes.

``make release`` (offline: nothing leaves the machine) packages the chart and
the operator's build context (tools/release.mk), then runs ``dist`` here:
the operator, runtime and PyTorch images (dlk8s_dev.images) as OCI archives beside
them. ``make publish REGISTRY=host[:port][/path]`` runs ``publish`` on that
dist/:

- the images to ``REGISTRY/dlk8s/operator:<version>``,
  ``REGISTRY/dlk8s/runtime:<version>`` and ``REGISTRY/dlk8s/pytorch:<version>``
  (skopeo, digests preserved: what is pushed is byte for byte what was built);
- the chart to ``oci://REGISTRY/dlk8s/charts/dlk8s:<version>`` (helm push),
  repackaged so that its ``image.repository`` is the registry's operator and
  ``image.digest`` the digest just pushed;
- ``dist/published.json``: those references and digests.

A loopback registry (localhost, 127.0.0.0/8, [::1]) is spoken to over plain
HTTP, as container engines allow by default; every other over HTTPS. With
``REGISTRY_USER`` and ``REGISTRY_PASSWORD`` in the environment both tools
log in from a credentials file of their own, removed afterwards; without
them they use the user's own logins (``helm registry login``, ``skopeo
login``).

The images are built for this machine's architecture only; docs/chart.md
says why.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from . import images as imagelib

REPO_ROOT = Path(__file__).resolve().parents[2]
# The images a release carries: the operator, and the runtime and PyTorch
# images the examples run.
RELEASED_IMAGES = ("operator", "runtime", "pytorch", "paddle")
# Where each goes below REGISTRY, and where the chart goes.
REPOSITORIES = {
    "operator": "dlk8s/operator",
    "runtime": "dlk8s/runtime",
    "pytorch": "dlk8s/pytorch",
    "paddle": "dlk8s/paddle",
}
CHART_PATH = "dlk8s/charts"
CHART_NAME = "dlk8s"
PUBLISHED = "published.json"
# A registry as `make publish` takes it: host[:port][/path], no scheme.
REGISTRY_RE = re.compile(
    r"^(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
    r"(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$"
)
SEMVER_RE = re.compile(r"^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$")


class ReleaseError(RuntimeError):
    pass


def _log(msg: str) -> None:
    print(f"[release] {msg}", file=sys.stderr, flush=True)


# -- names ------------------------------------------------------------------------


def check_version(version: str, recorded: str) -> None:
    """A release is the version in VERSION, or a pre-release or build of it.

    So a tag can publish 0.2.0-rc.1 once VERSION says 0.2.0, and a tag that
    does not match VERSION (a bump forgotten) publishes nothing.
    """
    if not SEMVER_RE.match(version):
        raise ReleaseError(f"VERSION={version!r} is not a semantic version (e.g. 0.1.0)")
    if version != recorded and not version.startswith((f"{recorded}-", f"{recorded}+")):
        raise ReleaseError(
            f"VERSION={version} is not the version in VERSION ({recorded}) nor a "
            f"pre-release of it ({recorded}-rc.1): bump VERSION first"
        )


def check_registry(registry: str) -> None:
    if not REGISTRY_RE.match(registry):
        raise ReleaseError(
            f"REGISTRY={registry!r}: expected host[:port][/path] without a scheme, "
            "e.g. ghcr.io/dlk8s or 127.0.0.1:5000"
        )


def registry_host(registry: str) -> str:
    """The host[:port] of a registry (its first path component)."""
    return registry.split("/", 1)[0]


def plain_http(registry: str) -> bool:
    """Loopback registries speak plain HTTP (container engines trust them by default)."""
    host = registry_host(registry)
    name = host[1:].split("]", 1)[0] if host.startswith("[") else host.rsplit(":", 1)[0]
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def image_repository(registry: str, which: str) -> str:
    return f"{registry}/{REPOSITORIES[which]}"


def chart_reference(registry: str) -> str:
    """What `helm install` takes: oci://REGISTRY/dlk8s/charts/dlk8s."""
    return f"oci://{registry}/{CHART_PATH}/{CHART_NAME}"


def image_archive(dist: Path, which: str, version: str) -> Path:
    return dist / f"dlk8s-{which}-{version}.oci.tar"


def chart_archive(dist: Path, version: str) -> Path:
    return dist / f"{CHART_NAME}-{version}.tgz"


# -- make release: the images into dist/ ----------------------------------------------


def write_images(dist: Path, version: str) -> dict[str, Path]:
    """Build (or take from the cache) each released image; link its archive into dist/."""
    written = {}
    for which in RELEASED_IMAGES:
        image = imagelib.BUILDERS[which]()
        target = image_archive(dist, which, version)
        target.unlink(missing_ok=True)
        try:
            os.link(image.archive, target)  # the cache's file: gigabytes not copied
        except OSError:
            shutil.copyfile(image.archive, target)
        _log(f"{target} ({image.name}, {image.size / 1e6:.0f} MB)")
        written[which] = target
    return written


def archive_digest(archive: Path) -> str:
    """The manifest digest of the one image in an OCI archive."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise ReleaseError(f"{archive}: no index.json")
        index = json.load(member)
    manifests = index.get("manifests") or []
    if len(manifests) != 1:
        raise ReleaseError(f"{archive}: {len(manifests)} images, expected one")
    return str(manifests[0]["digest"])


# -- the chart, pointed at what was pushed ---------------------------------------------


def set_image(values: str, repository: str, digest: str) -> str:
    """values.yaml's text with image.repository and image.digest set.

    A text edit of the two lines, so that every comment (what `helm show
    values` prints) stays; the result is parsed to prove the edit.
    """
    lines = values.splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == "image:")
    except StopIteration:
        raise ReleaseError("values.yaml has no top-level `image:`") from None
    wanted = {"repository": repository, "digest": digest}
    done = set()
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and not line[0].isspace():
            break  # the next top-level key or comment: the block ended
        key = re.match(r"^  ([a-z]+):", line)
        if key and key.group(1) in wanted:
            lines[i] = f"  {key.group(1)}: {json.dumps(wanted[key.group(1)])}\n"
            done.add(key.group(1))
    text = "".join(lines)
    image = (yaml.safe_load(text) or {}).get("image") or {}
    if done != set(wanted) or any(image.get(k) != v for k, v in wanted.items()):
        raise ReleaseError(f"could not set image.{sorted(set(wanted) - done)} in values.yaml")
    return text


def repackage_chart(chart: Path, repository: str, digest: str, out: Path, helm: str) -> Path:
    """The packaged ``chart`` again, with its operator image at ``repository@digest``."""
    with tempfile.TemporaryDirectory(prefix="dlk8s-chart-") as tmp:
        with tarfile.open(chart) as tar:
            tar.extractall(tmp, filter="data")
        values = Path(tmp) / CHART_NAME / "values.yaml"
        values.write_text(set_image(values.read_text(), repository, digest))
        out.mkdir(parents=True, exist_ok=True)
        _run([helm, "package", str(Path(tmp) / CHART_NAME), "--destination", str(out)])
    return out / chart.name


# -- pushing ----------------------------------------------------------------------------------


def _run(argv: Sequence[str]) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise ReleaseError(f"{' '.join(argv)} exited {done.returncode}\n{done.stderr[-3000:]}")
    return done.stdout + done.stderr


@contextlib.contextmanager
def credentials(registry: str, env: Mapping[str, str]) -> Iterator[Path | None]:
    """A Docker-style config file with REGISTRY_USER's login, or None without one.

    skopeo (--dest-authfile) and helm (--registry-config) both read it, so
    neither `login` writes the password anywhere that stays.
    """
    user, password = env.get("REGISTRY_USER", ""), env.get("REGISTRY_PASSWORD", "")
    if not user and not password:
        yield None
        return
    if not (user and password):
        raise ReleaseError("set both REGISTRY_USER and REGISTRY_PASSWORD, or neither")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    with tempfile.TemporaryDirectory(prefix="dlk8s-auth-") as tmp:
        path = Path(tmp) / "auth.json"
        path.touch(mode=0o600)
        path.write_text(json.dumps({"auths": {registry_host(registry): {"auth": token}}}))
        yield path


def push_image(archive: Path, target: str, plain: bool, authfile: Path | None) -> str:
    """skopeo copy of an OCI archive to ``target`` (repository:tag); the digest pushed."""
    with tempfile.TemporaryDirectory(prefix="dlk8s-push-") as tmp:
        digestfile = Path(tmp) / "digest"
        argv = ["skopeo", "copy", "--quiet", "--retry-times=3", "--preserve-digests"]
        argv += [f"--digestfile={digestfile}", f"--dest-tls-verify={str(not plain).lower()}"]
        if authfile is not None:
            argv.append(f"--dest-authfile={authfile}")
        _run([*argv, f"oci-archive:{archive}", f"docker://{target}"])
        return digestfile.read_text().strip()


def push_images(
    dist: Path, version: str, registry: str, authfile: Path | None
) -> dict[str, dict[str, str]]:
    """Each released image's repository, tag and digest, once pushed as built."""
    pushed = {}
    for which in RELEASED_IMAGES:
        archive = image_archive(dist, which, version)
        if not archive.is_file():
            raise ReleaseError(f"{archive} is missing: run `make release` first")
        repository = image_repository(registry, which)
        _log(f"pushing {archive.name} to {repository}:{version}")
        digest = push_image(archive, f"{repository}:{version}", plain_http(registry), authfile)
        built = archive_digest(archive)
        if digest != built:
            raise ReleaseError(f"{repository}: pushed {digest}, built {built}")
        pushed[which] = {"repository": repository, "tag": version, "digest": digest}
    return pushed


def push_chart(chart: Path, registry: str, helm: str, plain: bool, authfile: Path | None) -> str:
    """helm push to oci://REGISTRY/dlk8s/charts; the chart's manifest digest."""
    argv = [helm, "push", str(chart), f"oci://{registry}/{CHART_PATH}"]
    if plain:
        argv.append("--plain-http")
    if authfile is not None:
        argv.append(f"--registry-config={authfile}")
    said = _run(argv)
    found = re.search(r"Digest:\s*(sha256:[0-9a-f]{64})", said)
    return found.group(1) if found else ""


def publish(dist: Path, version: str, registry: str, helm: str) -> dict[str, Any]:
    """Push dist/'s images and chart to ``registry``; what went where (also in published.json)."""
    check_registry(registry)
    published: dict[str, Any] = {"version": version, "registry": registry}
    with credentials(registry, os.environ) as authfile:
        published["images"] = push_images(dist, version, registry, authfile)
        operator = published["images"]["operator"]
        with tempfile.TemporaryDirectory(prefix="dlk8s-publish-") as tmp:
            chart = repackage_chart(
                chart_archive(dist, version), operator["repository"], operator["digest"],
                Path(tmp), helm,
            )  # fmt: skip
            _log(f"pushing {chart.name} to oci://{registry}/{CHART_PATH}")
            plain = plain_http(registry)
            published["chartDigest"] = push_chart(chart, registry, helm, plain, authfile)
    published["chart"] = chart_reference(registry)
    (dist / PUBLISHED).write_text(json.dumps(published, indent=2) + "\n")
    return published


def install_hint(published: Mapping[str, Any]) -> str:
    plain = " --plain-http" if plain_http(str(published["registry"])) else ""
    return (
        f"helm install dlk8s {published['chart']} --version {published['version']}{plain} \\\n"
        "  -n dlk8s-system --create-namespace --set cloud=gke"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, what in (("dist", "the release's images into DIST"), ("publish", "push DIST")):
        cmd = sub.add_parser(name, help=what)
        cmd.add_argument("--dist", type=Path, required=True)
        cmd.add_argument("--version", required=True)
    sub.choices["publish"].add_argument("--registry", required=True)
    sub.choices["publish"].add_argument("--helm", default="helm")
    args = parser.parse_args(argv)
    try:
        check_version(args.version, (REPO_ROOT / "VERSION").read_text().strip())
        if args.cmd == "dist":
            write_images(args.dist, args.version)
            return 0
        published = publish(args.dist, args.version, args.registry, args.helm)
    except (ReleaseError, imagelib.ImageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(json.dumps(published, indent=2))
    print(f"Install it:\n  {install_hint(published)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
