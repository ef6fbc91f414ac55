"""The controller config file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlk8s.job.config import Accelerator, AcceleratorVolume, ConfigError, load_config, parse_config

SEED_LAYOUT = """
accelerators:
  grpcServerFilePath: grpc/server.py
  alpha.kubernetes.io/nvidia-gpu:
    volumes:
      - name: nvidia-libs
        mountPath: /usr/local/nvidia/lib64
        hostPath: /home/kubernetes/bin/nvidia/lib64
    envVars:
      - name: LD_LIBRARY_PATH
        value: /usr/local/nvidia/lib64
"""


def test_defaults_without_a_file() -> None:
    config = load_config(None)
    assert config.tf_image == "tensorflow/tensorflow:2.16.1"
    assert dict(config.accelerators) == {}
    assert config.grpc_server_script == ""
    assert "grpcServerFilePath" in config.grpc_server_error


def test_the_seed_layout_with_the_script_path_inside_accelerators(tmp_path: Path) -> None:
    (tmp_path / "grpc").mkdir()
    (tmp_path / "grpc" / "server.py").write_text("print('serving')\n")
    path = tmp_path / "controller_config_file.yaml"
    path.write_text(SEED_LAYOUT)
    config = load_config(path)
    assert list(config.accelerators) == ["alpha.kubernetes.io/nvidia-gpu"]
    assert config.accelerators["alpha.kubernetes.io/nvidia-gpu"] == Accelerator(
        volumes=(
            AcceleratorVolume(
                "nvidia-libs", "/usr/local/nvidia/lib64", "/home/kubernetes/bin/nvidia/lib64"
            ),
        ),
        env_vars=(("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64"),),
    )
    assert config.grpc_server_file_path == "grpc/server.py"
    assert config.grpc_server_script == "print('serving')\n"
    assert config.grpc_server_error == ""


def test_a_missing_script_is_not_an_error_until_needed(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("grpcServerFilePath: /nowhere/grpc_tensorflow_server.py\ntfImage: tf:1\n")
    config = load_config(path)
    assert config.tf_image == "tf:1"
    assert config.grpc_server_script == ""
    assert "/nowhere/grpc_tensorflow_server.py" in config.grpc_server_error


def test_top_level_options_win_over_the_seed_layout() -> None:
    config = parse_config(
        {"grpcServerFilePath": "/a.py", "accelerators": {"grpcServerFilePath": "/b.py"}}
    )
    assert config.grpc_server_file_path == "/a.py"
    assert dict(config.accelerators) == {}


def test_numbers_in_env_values_become_strings() -> None:
    config = parse_config(
        {"accelerators": {"nvidia.com/gpu": {"envVars": [{"name": "N", "value": 1}]}}}
    )
    assert config.accelerators["nvidia.com/gpu"].env_vars == (("N", "1"),)


VOLUME = {"name": "v", "mountPath": "/m", "hostPath": "/h"}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "controller config"),
        ({"accelerators": []}, "accelerators"),
        ({"accelerators": {"nvidia.com/gpu": "yes"}}, "nvidia.com/gpu"),
        (
            {"accelerators": {"nvidia.com/gpu": {"volumes": [{"name": "v"}]}}},
            "volumes[0].mountPath",
        ),
        ({"accelerators": {"nvidia.com/gpu": {"envVars": {"a": 1}}}}, "envVars"),
        (
            {"accelerators": {"nvidia.com/gpu": {"volumes": [{**VOLUME, "type": "Dir"}]}}},
            "volumes[0].type",
        ),
        ({"tfImage": 3}, "tfImage"),
        ({"images": ["redis:7"]}, "images"),
        ({"images": {"reddis": "redis:7"}}, "images.reddis"),
        ({"images": {"etcd": 3}}, "images.etcd"),
    ],
)
def test_malformed_config_names_the_field(data: object, field: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(field)):
        parse_config(data)


def test_the_images_put_into_pods_default_and_can_each_be_set() -> None:
    assert (parse_config({}).redis_image, parse_config({}).etcd_image) == (
        "redis:7.2-alpine",
        "quay.io/coreos/etcd:v3.2.1",
    )
    config = parse_config({"images": {"redis": "mirror.local/redis:7", "etcd": None}})
    assert config.redis_image == "mirror.local/redis:7"
    assert config.etcd_image == "quay.io/coreos/etcd:v3.2.1"


def test_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("accelerators: [\n")
    with pytest.raises(ConfigError):
        load_config(path)
