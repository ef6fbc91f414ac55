"""examples/ runs anywhere: every image it names is the runtime image or the
PyTorch image a release publishes (beside the chart's operator image, with
the version in VERSION), and examples/local/ gives each example the local
cluster's image instead (examples/README.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from dlk8s_dev.images import LOCAL_TAG, NAME_PREFIX

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"
LOCAL = EXAMPLES / "local"
# The published image each component swaps for the local one.
COMPONENTS = {
    "runtime": LOCAL / "runtime-image",
    "pytorch": LOCAL / "pytorch-image",
    "paddle": LOCAL / "paddle-image",
}


def published(which: str) -> str:
    """An image's repository where releases go: the chart's default
    operator repository's sibling (make publish pushes them below REGISTRY)."""
    image = yaml.safe_load((ROOT / "charts" / "dlk8s" / "values.yaml").read_text())["image"]
    repository = image["repository"]
    if image["registry"]:
        repository = f"{image['registry']}/{repository}"
    parent, name = repository.rsplit("/", 1)
    assert name == "operator", repository
    return f"{parent}/{which}"


def images(node: Any) -> Iterator[str]:
    """Every image a manifest names: containers', a PaddleJob's spec.image and
    a TFJob's spec.tfImage."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("image", "tfImage") and isinstance(value, str):
                yield value
            else:
                yield from images(value)
    elif isinstance(node, list):
        for item in node:
            yield from images(item)


def example_dirs() -> list[Path]:
    return sorted(p.parent for p in EXAMPLES.glob("*/kustomization.yaml"))


def example_images(example: Path) -> set[str]:
    """What its manifests name, and those of the examples it builds on (a
    folder among its kustomization's resources, e.g. pytorchjob-elastic's)."""
    found = {
        image
        for path in example.rglob("*.yaml")
        for document in yaml.safe_load_all(path.read_text())
        for image in images(document)
    }
    kustomization = yaml.safe_load((example / "kustomization.yaml").read_text())
    for resource in kustomization.get("resources", []):
        if (example / resource).is_dir():
            found |= example_images((example / resource).resolve())
    return found


def test_every_example_runs_a_published_image_of_this_version() -> None:
    version = (ROOT / "VERSION").read_text().strip()
    wanted = {f"{published(name)}:{version}" for name in COMPONENTS}
    found = {str(p.relative_to(ROOT)): example_images(p) for p in example_dirs()}
    assert {i for names in found.values() for i in names} == wanted, found
    # Every example that trains names one (the seed jobs, whose images are
    # gone, live in tests/data), and a PyTorch example no other.
    for example, names in found.items():
        assert len(names) == 1, (example, names)


def test_every_example_has_an_overlay_with_the_local_image() -> None:
    assert [p.name for p in example_dirs()] == sorted(
        p.parent.name
        for p in LOCAL.glob("*/kustomization.yaml")
        if p.parent not in COMPONENTS.values()
    )
    by_image = {f"{published(name)}:" + (ROOT / "VERSION").read_text().strip(): component
                for name, component in COMPONENTS.items()}  # fmt: skip
    for example in example_dirs():
        overlay = yaml.safe_load((LOCAL / example.name / "kustomization.yaml").read_text())
        assert overlay["resources"] == [f"../../{example.name}"]
        [image] = example_images(example)
        assert overlay["components"] == [f"../{by_image[image].name}"], example
    for name, path in COMPONENTS.items():
        component = yaml.safe_load((path / "kustomization.yaml").read_text())
        assert component["kind"] == "Component"
        assert component["images"] == [
            {"name": published(name), "newName": f"{NAME_PREFIX}/{name}", "newTag": LOCAL_TAG}
        ]


def test_a_paddlejobs_image_is_rewritten_by_kustomize_too() -> None:
    # spec.image is no container's: without this, `images:` would leave it.
    config = yaml.safe_load((EXAMPLES / "paddlejob-elastic" / "kustomizeconfig.yaml").read_text())
    assert {"path": "spec/image", "kind": "PaddleJob"} in config["images"]
