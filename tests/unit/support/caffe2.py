"""The Caffe2Job seed examples as the tests read them."""

from __future__ import annotations

from typing import Any

from dlk8s.job import childnames
from dlk8s.job.config import parse_config

from .seeds import kwok_job

UID = "c2c2c2c2-0000-4000-8000-00000000c002"
RUNTIME_ID = childnames.runtime_id(UID)
CONFIG = parse_config({})
IN_MASTER = "example-job-redis-in-master"
REDIS_SERVICE = f"{IN_MASTER}-redis"


def seed(name: str) -> dict[str, Any]:
    return kwok_job(name, namespace="default", uid=UID)
