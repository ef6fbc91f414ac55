"""The tests' in-process `kubectl get` (reads.py) answers what kubectl answers.

Every wait of the suite reads through it, so a difference here would make
tests judge something kubectl would not have shown them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dlk8s_dev.localcluster import LocalCluster

from .. import reads
from ..helpers import apply, get_json, get_or_none, job_manifest, wait_for_pods, wait_for_services

pytestmark = pytest.mark.usefixtures("operator")


def printed(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    out = cluster.kubectl("get", *args, "-o", "json")
    found: dict[str, Any] = json.loads(out.stdout)
    return found


def what(found: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """Each object by what it is and which one (a list's or a single one)."""
    items = found["items"] if found.get("kind") == "List" else [found]
    return sorted(
        (i["apiVersion"], i["kind"], i["metadata"].get("namespace", ""), i["metadata"]["uid"])
        for i in items
    )


def test_each_form_the_tests_use_reads_what_kubectl_prints(
    cluster: LocalCluster, namespace: str
) -> None:
    job = job_manifest("TFJob", "read", {"MASTER": 1, "WORKER": 2}, "tensorflow")
    apply(cluster, namespace, job)
    pods = {"read-master-0", "read-worker-0", "read-worker-1"}
    wait_for_pods(cluster, namespace, "read", pods)
    # Each replica's Service comes a moment after its pod runs.
    wait_for_services(cluster, namespace, "read", pods)
    selector = "dlk8s.io/job-name=read"
    forms = [
        ("pods", "-n", namespace, "-l", selector),
        ("pods", "-A", "-l", selector),
        ("po", "read-master-0", "-n", namespace),
        ("pod/read-worker-1", "-n", namespace),
        ("pods", "-n", namespace, "--field-selector", "metadata.name=read-worker-0"),
        ("tfjob", "read", "-n", namespace),
        ("tfjobs.dlk8s.io", "-n", namespace),
        ("TFJob", "read", "-n", namespace),
        ("crd", "tfjobs.dlk8s.io"),
        ("nodes",),
        ("namespace", namespace),
        ("services", "--namespace", namespace, "--selector", selector),
    ]
    for form in forms:
        query = reads.parse(form)
        assert query is not None, form
        answer = reads.reader(cluster).get(query)
        assert answer is not None, f"{form}: not read in process"
        assert what(answer) == what(printed(cluster, *form)), form
        assert what(answer), f"{form} found nothing, which proves nothing"
    # The forms kubectl alone reads.
    for form in [("pods,services", "-n", namespace), ("pods", "-o", "wide"), ("a", "b", "c")]:
        assert reads.parse(form) is None, form
    unknown = reads.Query("nothings", None, None, False, None, None)
    assert reads.reader(cluster).get(unknown) is None


def test_a_missing_object_is_none_either_way(cluster: LocalCluster, namespace: str) -> None:
    assert get_or_none(cluster, "tfjob", "never-made", "-n", namespace) is None
    with pytest.raises(reads.NotFoundError):
        reads.reader(cluster).get(reads.Query("pod", "never-made", namespace, False, None, None))


def test_an_object_made_in_process_is_the_one_kubectl_apply_makes(
    cluster: LocalCluster, namespace: str
) -> None:
    """What apply() makes in this process: the same object, the same
    last-applied record, so the next `kubectl apply` (a three-way merge)
    removes a label the new manifest dropped, as it does on kubectl's own."""
    job = job_manifest("TFJob", "made", {"MASTER": 1}, "tensorflow")
    job["metadata"]["labels"] = {"team": "a", "stage": "test"}
    theirs = json.loads(json.dumps(job))
    theirs["metadata"]["name"] = "applied"
    assert reads.reader(cluster).create(job, namespace)
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(theirs))
    made = printed(cluster, "tfjob", "made", "-n", namespace)
    applied = printed(cluster, "tfjob", "applied", "-n", namespace)
    last = reads.LAST_APPLIED
    assert json.loads(made["metadata"]["annotations"][last]) == json.loads(
        applied["metadata"]["annotations"][last].replace('"applied"', '"made"')
    )
    assert made["spec"] == applied["spec"]
    managers = {
        name: [
            (m["manager"], m["operation"], m["fieldsV1"])
            for m in get_json(cluster, "tfjob", name, "-n", namespace)["metadata"]["managedFields"]
            if m.get("subresource") != "status"  # the operator's
        ]
        for name in ("made", "applied")
    }
    assert managers["made"] == managers["applied"]
    # Made again: not in this process (it exists), by kubectl's merge.
    assert not reads.reader(cluster).create(job, namespace)
    for manifest in (job, theirs):
        del manifest["metadata"]["labels"]["stage"]
        apply(cluster, namespace, manifest)
    for name in ("made", "applied"):
        labels = printed(cluster, "tfjob", name, "-n", namespace)["metadata"]["labels"]
        assert labels == {"team": "a"}, (name, labels)
