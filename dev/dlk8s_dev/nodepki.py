"""The real node's certificates: a CA, the kubelet's serving certificate, and
the API server's client certificate for talking to the kubelet."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .nodehost import NodeError


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise NodeError(f"openssl {' '.join(args)}: {done.stderr}")


# Every key: EC P-256, unencrypted (the local cluster's processes read them).
EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
# Except where a reader takes nothing else: cert-controller's rotator
# (training-operator's webhooks) reads its CA key as PKCS#1 RSA only.
RSA_KEY = ("-newkey", "rsa:2048", "-nodes")
DAYS = 30


def make_ca(
    pki: Path, common_name: str, days: int = DAYS, rsa: bool = False, alt_name: str = ""
) -> None:
    """ca.crt and ca.key in ``pki``, a CA of its own; ``rsa``: a PKCS#1 RSA
    key, not EC; ``alt_name``: its subjectAltName (e.g. DNS:<name>)."""
    _openssl(
        "req", "-x509", *(RSA_KEY if rsa else EC_KEY), "-keyout", "ca.key", "-out", "ca.crt",
        "-days", str(days), "-subj", f"/CN={common_name}",
        *(("-addext", f"subjectAltName={alt_name}") if alt_name else ()), cwd=pki,
    )  # fmt: skip
    if rsa:
        _openssl("rsa", "-in", "ca.key", "-traditional", "-out", "ca.key", cwd=pki)


def issue(
    pki: Path, name: str, subject: str, extensions: str, key: str = "", days: int = DAYS
) -> None:
    """<name>.crt (and <name>.key, or ``key``), signed by the CA in ``pki``;
    ``extensions`` is an openssl extfile's text (subjectAltName, usage)."""
    key = key or f"{name}.key"
    (pki / f"{name}.ext").write_text(extensions)
    _openssl("req", *EC_KEY, "-keyout", key, "-out", f"{name}.csr", "-subj", subject, cwd=pki)
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", str(days), "-extfile", f"{name}.ext", "-out", f"{name}.crt",
        cwd=pki,
    )  # fmt: skip


def make_pki(pki: Path, node_name: str, node_ip: str) -> None:
    """A CA for the kubelet's serving certificate and the apiserver's client certificate."""
    pki.mkdir(parents=True)
    make_ca(pki, "dlk8s-node-ca")
    issue(
        pki,
        "kubelet",
        f"/CN=system:node:{node_name}/O=system:nodes",
        f"subjectAltName=IP:{node_ip},DNS:{node_name}\nextendedKeyUsage=serverAuth\n",
    )
    issue(
        pki,
        "apiserver-kubelet-client",
        "/CN=kube-apiserver-kubelet-client/O=system:masters",
        "extendedKeyUsage=clientAuth\n",
    )
