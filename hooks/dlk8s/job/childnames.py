"""Names and label values of a job's children.

Children are named `{job}-{part}-...` in lower case. A Service name must be a
DNS-1035 label (at most 63 characters, a letter first, a letter or digit
last), and pods share their Service's name, so every child name obeys that
rule. A job name can be up to 253 characters and may contain dots or start
with a digit; then the job part is cut and made valid, and a hash of the full
job name is added so two jobs never share a child name. The role and index
stay readable at the end.

Everything here is deterministic: the same job always gets the same names and
runtime id, so nothing about them needs to be stored.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

MAX_NAME: Final = 63
HASH_LEN: Final = 8
RUNTIME_ID_LEN: Final = 8

_DNS_1035_LABEL: Final = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_SUFFIX: Final = re.compile(r"(-[a-z0-9]+)*")
_LABEL_VALUE: Final = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def short_hash(text: str, length: int = HASH_LEN) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def runtime_id(uid: str) -> str:
    """A short id for the job, stable across operator restarts (from its uid)."""
    return short_hash(f"runtime-id:{uid}", RUNTIME_ID_LEN)


def is_dns_label(name: str) -> bool:
    return len(name) <= MAX_NAME and _DNS_1035_LABEL.fullmatch(name) is not None


def child_name(job: str, *parts: str | int) -> str:
    """`{job}-{part}-...`, shortened to a valid DNS-1035 label when needed."""
    suffix = "".join(f"-{part}" for part in parts).lower()
    name = job.lower() + suffix
    if is_dns_label(name):
        return name
    room = MAX_NAME - len(suffix) - 1 - HASH_LEN
    tag = short_hash(job)
    if room < 2 or not _SUFFIX.fullmatch(suffix):
        # Only reachable with parts we never use; stay valid regardless.
        return "j" + short_hash(name, MAX_NAME - 1)
    head = _dns_safe(job)[:room].rstrip("-")
    return f"{head}-{tag}{suffix}"


def _dns_safe(text: str) -> str:
    text = re.sub(r"[^a-z0-9-]", "-", text.lower())
    return text if text[:1].isalpha() and text[:1].isascii() else "j" + text


def pod_name(job: str, role: str, index: int) -> str:
    return child_name(job, role, index)


def free_pod_name(job: str, role: str, index: int, taken: set[str]) -> str:
    """The slot's own pod name, or while a pod stuck terminating holds it
    (reconcile.stuck), the first of `{name}-r1`, `{name}-r2`, ... not taken:
    the same world always gives the same name."""
    name, tries = pod_name(job, role, index), 1
    while name in taken:
        name, tries = child_name(job, role, index, f"r{tries}"), tries + 1
    return name


def tensorboard_name(job: str) -> str:
    return child_name(job, "tensorboard")


def grpc_server_configmap_name(job: str) -> str:
    return child_name(job, "ps-grpc-server")


def label_value(text: str) -> str:
    """`text` as a valid label value (at most 63 characters).

    A long job name keeps its start and gets a hash of the whole name, so the
    value still tells jobs apart. Children are found by the label's existence
    and grouped by their controller ownerReference, so the value is a
    convenience for `kubectl get -l`, never the identity of the job.
    """
    if len(text) <= MAX_NAME and _LABEL_VALUE.fullmatch(text):
        return text
    safe = re.sub(r"[^-A-Za-z0-9_.]", "-", text)
    head = safe[: MAX_NAME - HASH_LEN - 1]
    head = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", head)
    return f"{head}-{short_hash(text)}" if head else short_hash(text)
