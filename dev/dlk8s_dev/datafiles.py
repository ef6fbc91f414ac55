"""The dev tooling's configuration files (``dlk8s_dev/data/``), filled in.

Each file is the configuration as its program reads it (kwok's stages, the
real node's containerd, CNI, kubelet, kube-proxy and CoreDNS settings), with
``@{name}`` where a run puts its own paths, addresses and names: ``$`` and
``{{ }}`` belong to kwok's and Go's templates in them, ``@`` to nobody.
"""

from __future__ import annotations

import string
from importlib import resources
from typing import Any

import yaml

# Only @{name} (and @@{ for a literal @{): a lone @ stays as it is.
_PLACEHOLDER = (
    r"@(?:(?P<escaped>@)(?=\{)|\{(?P<braced>[_a-z][_a-z0-9]*)\}"
    r"|(?P<named>(?!))|(?P<invalid>(?!)))"
)


class _Template(string.Template):
    delimiter = "@"
    pattern = _PLACEHOLDER  # type: ignore[assignment]  # Template compiles a str


def text(name: str, /, **values: object) -> str:
    """The file ``name`` with every ``@{key}`` replaced; a key not given is an error."""
    raw = resources.files("dlk8s_dev").joinpath("data", name).read_text()
    return _Template(raw).substitute({k: str(v) for k, v in values.items()})


def yaml_docs(name: str, /, **values: object) -> list[Any]:
    """The YAML file ``name``, filled in, as data (every document)."""
    return list(yaml.safe_load_all(text(name, **values)))


def yaml_doc(name: str, /, **values: object) -> Any:
    """The one-document YAML file ``name``, filled in, as data."""
    return yaml.safe_load(text(name, **values))
