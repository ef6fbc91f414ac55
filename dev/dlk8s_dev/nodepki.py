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


def make_pki(pki: Path, node_name: str, node_ip: str) -> None:
    """A CA for the kubelet's serving certificate and the apiserver's client certificate."""
    pki.mkdir(parents=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "30",
        "-subj",
        "/CN=dlk8s-node-ca",
        cwd=pki,
    )
    for name, subj, ext in (
        (
            "kubelet",
            f"/CN=system:node:{node_name}/O=system:nodes",
            f"subjectAltName=IP:{node_ip},DNS:{node_name}\nextendedKeyUsage=serverAuth\n",
        ),
        (
            "apiserver-kubelet-client",
            "/CN=kube-apiserver-kubelet-client/O=system:masters",
            "extendedKeyUsage=clientAuth\n",
        ),
    ):
        (pki / f"{name}.ext").write_text(ext)
        _openssl(
            "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=pki
        )
        _openssl(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "30",
            "-extfile",
            f"{name}.ext",
            "-out",
            f"{name}.crt",
            cwd=pki,
        )
