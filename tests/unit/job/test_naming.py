"""Child names, label values and the runtime id."""

from __future__ import annotations

import re

import pytest

from dlk8s.job.childnames import (
    child_name,
    grpc_server_configmap_name,
    label_value,
    pod_name,
    runtime_id,
    tensorboard_name,
)

DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")


def valid_service_name(name: str) -> bool:
    return len(name) <= 63 and DNS_1035.fullmatch(name) is not None


def test_short_names_are_job_role_index_in_lower_case() -> None:
    assert pod_name("example-job", "WORKER", 3) == "example-job-worker-3"
    assert tensorboard_name("example-job") == "example-job-tensorboard"
    assert grpc_server_configmap_name("example-job") == "example-job-ps-grpc-server"


def test_a_name_of_exactly_63_characters_is_kept() -> None:
    job = "j" * 54  # + "-master-0" = 63
    assert pod_name(job, "MASTER", 0) == job + "-master-0"


@pytest.mark.parametrize("length", [55, 100, 253])
def test_long_names_are_cut_with_a_hash_and_keep_role_and_index(length: int) -> None:
    job = ("a-very-long-training-job-name-" * 10)[:length].rstrip("-") + "x"
    name = pod_name(job, "WORKER", 12)
    assert valid_service_name(name)
    assert name.endswith("-worker-12")
    assert name.startswith("a-very-long-training")
    assert name == pod_name(job, "WORKER", 12)  # stable
    assert name != pod_name(job + "y", "WORKER", 12)


def test_jobs_differing_only_past_the_cut_get_different_names() -> None:
    base = "x" * 70
    assert pod_name(base + "a", "PS", 0) != pod_name(base + "b", "PS", 0)
    assert len({tensorboard_name(base + c) for c in "abcdef"}) == 6


@pytest.mark.parametrize("job", ["my.job.v2", "1st-job", "9", "a..b", "x" * 253, "ends-with-dot."])
def test_any_kubernetes_object_name_yields_a_valid_service_name(job: str) -> None:
    for name in (pod_name(job, "MASTER", 0), tensorboard_name(job), child_name(job)):
        assert valid_service_name(name), name


def test_dotted_names_do_not_collide_with_dashed_ones() -> None:
    assert pod_name("a.b", "MASTER", 0) != pod_name("a-b", "MASTER", 0)


def test_runtime_id_is_short_stable_and_follows_the_uid() -> None:
    first = runtime_id("e11f9577-b5e5-11e7-8522-42010a8e01a4")
    assert first == runtime_id("e11f9577-b5e5-11e7-8522-42010a8e01a4")
    assert first != runtime_id("e11f9577-b5e5-11e7-8522-42010a8e01a5")
    assert re.fullmatch(r"[0-9a-f]{8}", first)


def test_label_values_are_kept_when_valid() -> None:
    assert label_value("example-job") == "example-job"
    assert label_value("a.b-c_d") == "a.b-c_d"


@pytest.mark.parametrize("text", ["x" * 64, "y" * 253, "a." + "b" * 100, "-" * 70])
def test_long_label_values_are_shortened_validly(text: str) -> None:
    value = label_value(text)
    assert len(value) <= 63
    assert LABEL_VALUE.fullmatch(value)
    assert value != label_value(text + "z")
