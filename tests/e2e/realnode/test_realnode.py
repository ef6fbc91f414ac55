"""The real node: real containers beside the kwok nodes, on this machine only.

Pods run from images built here (no registry), print to logs the API server
reads through the kubelet, resolve Services through CoreDNS, and reach each
other and the API server through kube-proxy. All on the session's real node,
beside the jobs that train there. That a stopped or killed node leaves
nothing behind is tests/e2e/kinds/test_stopping.py's: each of its runs has a pod
running on its real node.
"""

from __future__ import annotations

import json
import socket
import subprocess
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster
from dlk8s_dev.realnode import RealNode

from ..helpers import get_json, temporary_namespace, wait_until


@pytest.fixture
def ns(real_cluster: LocalCluster) -> Iterator[str]:
    with temporary_namespace(real_cluster) as name:
        yield name


def node_of(cluster: LocalCluster) -> RealNode:
    assert cluster.node is not None
    return cluster.node


def python_pod(
    cluster: LocalCluster,
    namespace: str,
    name: str,
    code: str,
    labels: dict[str, str] | None = None,
    restart: str = "Never",
    **pod_spec: Any,
) -> None:
    """A pod on the real node running ``python3 -c code`` in the base image."""
    node = node_of(cluster)
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            **node.pod_placement(),
            "restartPolicy": restart,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": node.image("base"),
                    "imagePullPolicy": "Never",
                    "command": ["python3", "-u", "-c", textwrap.dedent(code)],
                }
            ],
            **pod_spec,
        },
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(manifest))


def phase(cluster: LocalCluster, namespace: str, name: str) -> str:
    pod = get_json(cluster, "pod", name, "-n", namespace)
    return str(pod.get("status", {}).get("phase", ""))


def wait_done(cluster: LocalCluster, namespace: str, name: str, timeout: float = 90) -> str:
    wait_until(
        lambda: phase(cluster, namespace, name) in ("Succeeded", "Failed"),
        timeout=timeout,
        what=f"pod {name} to finish",
    )
    return phase(cluster, namespace, name)


def logs(cluster: LocalCluster, namespace: str, name: str) -> str:
    return cluster.kubectl("logs", name, "-n", namespace).stdout


def succeeds(cluster: LocalCluster, namespace: str, name: str, timeout: float = 90) -> str:
    """Waits for the pod to finish, asserts it succeeded, returns its log."""
    ended = wait_done(cluster, namespace, name, timeout)
    out = logs(cluster, namespace, name)
    assert ended == "Succeeded", f"pod {name} {ended}:\n{out}"
    return out


def test_node_ready_beside_kwok_nodes(real_cluster: LocalCluster) -> None:
    node = node_of(real_cluster)
    nodes = {n["metadata"]["name"]: n for n in get_json(real_cluster, "nodes")["items"]}
    assert {"kwok-node-0", "kwok-node-1", node.name} <= set(nodes)
    for n in nodes.values():
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert [c["status"] for c in ready] == ["True"], n["metadata"]["name"]
    real = nodes[node.name]
    assert {"type": "InternalIP", "address": node.node_ip} in real["status"]["addresses"]
    assert real["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert any(t["key"] == "dlk8s.io/real-node" for t in real["spec"]["taints"])
    # The API server is reachable on the node's veth, where pods reach it too.
    assert real_cluster.server.startswith(f"https://{node.host_ip}:")


def test_pod_runs_and_logs_show_its_output(real_cluster: LocalCluster, ns: str) -> None:
    python_pod(
        real_cluster,
        ns,
        "hello",
        """
        import platform, socket
        print("hello from", socket.gethostname(), "python", platform.python_version())
        """,
    )
    out = succeeds(real_cluster, ns, "hello")
    pod = get_json(real_cluster, "pod", "hello", "-n", ns)
    assert pod["spec"]["nodeName"] == node_of(real_cluster).name
    assert pod["status"]["podIP"].startswith(node_of(real_cluster).pod_cidr.rsplit(".", 1)[0])
    assert "hello from hello python 3." in out


def test_exec_into_a_running_pod(real_cluster: LocalCluster, ns: str) -> None:
    python_pod(real_cluster, ns, "sleeper", "import time; time.sleep(3600)")
    real_cluster.kubectl("wait", "pod/sleeper", "-n", ns, "--for=condition=Ready", "--timeout=60s")
    out = real_cluster.kubectl("exec", "sleeper", "-n", ns, "--", "cat", "/etc/os-release").stdout
    assert "Debian" in out


def test_failing_container_reports_its_exit_code(real_cluster: LocalCluster, ns: str) -> None:
    python_pod(real_cluster, ns, "fails", "import sys; print('about to fail'); sys.exit(3)")
    assert wait_done(real_cluster, ns, "fails") == "Failed"
    state = get_json(real_cluster, "pod", "fails", "-n", ns)["status"]["containerStatuses"][0]
    assert state["state"]["terminated"]["exitCode"] == 3
    assert "about to fail" in logs(real_cluster, ns, "fails")


SERVER = """
import http.server, socket
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("served by " + socket.gethostname()).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("", 8080), H).serve_forever()
"""


def service(name: str, namespace: str, selector: dict[str, str], headless: bool) -> str:
    spec: dict[str, Any] = {"selector": selector, "ports": [{"port": 8080, "targetPort": 8080}]}
    if headless:
        spec["clusterIP"] = "None"
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


@pytest.mark.parametrize("headless", [True, False], ids=["headless", "clusterip"])
def test_pod_reaches_a_service_by_name(real_cluster: LocalCluster, ns: str, headless: bool) -> None:
    """As a job's replicas do: `{name}.{namespace}.svc` and the full cluster.local name."""
    # A job's per-replica name, e.g. {job}-{role}-{index}.
    name = "job-worker-0"
    python_pod(real_cluster, ns, name, SERVER, labels={"replica": name}, restart="Always")
    real_cluster.kubectl("apply", "-f", "-", input=service(name, ns, {"replica": name}, headless))
    real_cluster.kubectl("wait", f"pod/{name}", "-n", ns, "--for=condition=Ready", "--timeout=60s")
    server_ip = get_json(real_cluster, "pod", name, "-n", ns)["status"]["podIP"]
    svc_ip = get_json(real_cluster, "service", name, "-n", ns)["spec"]["clusterIP"]
    python_pod(
        real_cluster,
        ns,
        "client",
        f"""
        import socket, time, urllib.request
        for host in ("{name}.{ns}.svc", "{name}.{ns}.svc.cluster.local", "{name}"):
            for attempt in range(30):
                try:
                    ip = socket.gethostbyname(host)
                    with urllib.request.urlopen(f"http://{{host}}:8080/", timeout=5) as r:
                        print(host, ip, r.read().decode(), flush=True)
                    break
                except OSError as exc:
                    print("retry", host, exc, flush=True)
                    time.sleep(1)
        """,
    )
    out = succeeds(real_cluster, ns, "client", timeout=120)
    expected_ip = server_ip if headless else svc_ip
    for host in (f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local", name):
        assert f"{host} {expected_ip} served by {name}" in out, out


def test_pod_reaches_the_api_server_through_the_kubernetes_service(
    real_cluster: LocalCluster, ns: str
) -> None:
    python_pod(
        real_cluster,
        ns,
        "api-client",
        """
        import json, os, ssl, urllib.request
        sa = "/var/run/secrets/kubernetes.io/serviceaccount"
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        print("service host", host)
        ctx = ssl.create_default_context(cafile=f"{sa}/ca.crt")
        token = open(f"{sa}/token").read()
        ns = open(f"{sa}/namespace").read()
        # By name and, as in-cluster clients do, by KUBERNETES_SERVICE_HOST.
        for url in ("https://kubernetes.default.svc/version",
                    f"https://{host}/api/v1/namespaces/{ns}"):
            req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            try:
                with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                    print(url, r.status, json.load(r).get("gitVersion", "-"))
            except urllib.error.HTTPError as exc:
                print(url, exc.code)
        """,
    )
    out = succeeds(real_cluster, ns, "api-client")
    version = json.loads(real_cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert "service host 10.96.0.1" in out
    assert f"https://kubernetes.default.svc/version 200 {version['gitVersion']}" in out, out
    # Authenticated as the pod's ServiceAccount, which may not read namespaces:
    # the API server saw a valid token and said no, as RBAC should.
    assert f"/api/v1/namespaces/{ns} 403" in out, out


def test_names_outside_the_cluster_do_not_resolve(real_cluster: LocalCluster, ns: str) -> None:
    python_pod(
        real_cluster,
        ns,
        "dns-outside",
        """
        import socket
        try:
            socket.gethostbyname("example.invalid")
            print("resolved")
        except socket.gaierror as exc:
            print("no such name", exc.errno)
        """,
    )
    assert "no such name" in succeeds(real_cluster, ns, "dns-outside")


def test_node_network_has_no_route_out(real_cluster: LocalCluster) -> None:
    """Pods route only to the node: the node's namespace has no default route."""
    node = node_of(real_cluster)
    routes = subprocess.run(
        node.namespaces.enter("ip", "-4", "route", "show", net_only=True),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "default" not in routes, routes
    assert node.pod_cidr in routes
    host_save = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
    assert node.pod_cidr not in host_save, "kube-proxy's rules belong in the node's namespace"


def test_no_dial_into_the_cluster_ranges_leaves_the_machine(real_cluster: LocalCluster) -> None:
    """An address of our ranges that no node claims is refused by the host,
    not sent along its default route (e.g. a late dial after a node is gone)."""
    node = node_of(real_cluster)
    unclaimed = [
        a for a in ("10.245.255.2", "10.244.255.9", "10.96.255.1") if node.pod_cidr not in a
    ]
    for address in unclaimed:
        route = subprocess.run(["ip", "route", "get", address], capture_output=True, text=True)
        assert route.returncode != 0 or "unreachable" in route.stdout, route.stdout
        probe = socket.socket()
        probe.settimeout(2)
        # At once, by the host's own routing: not a timeout of packets sent away.
        with pytest.raises(OSError, match=r"No route to host|Network is unreachable"):
            probe.connect((address, 443))
        probe.close()
