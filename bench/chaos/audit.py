"""The chaos cluster's audit log (LocalCluster.audited_groups): the writes
of the operators' ServiceAccount, each with its user agent, which names the
leader-election identity of the operator that sent it (dlk8s.cli.main)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path


@dataclass(frozen=True)
class Write:
    agent: str
    verb: str
    resource: str
    code: int  # the API server's answer; 0 when it gave none
    at: datetime  # when the API server received it

    @property
    def to_lease(self) -> bool:
        return self.resource == "leases"


def writes(path: Path) -> list[Write]:
    """Every write in the log, in the order the API server answered them."""
    found = []
    for line in path.read_text().splitlines() if path.exists() else []:
        event = json.loads(line)
        found.append(
            Write(
                agent=str(event.get("userAgent") or ""),
                verb=str(event.get("verb") or ""),
                resource=str((event.get("objectRef") or {}).get("resource") or ""),
                code=int((event.get("responseStatus") or {}).get("code") or 0),
                at=_time(event["requestReceivedTimestamp"]),
            )
        )
    return found


def by(identity: str, log: list[Write]) -> list[Write]:
    """The writes of the operator whose election identity this is."""
    return [w for w in log if w.agent.endswith(f" {identity}")]


def took_lease(identity: str, log: list[Write]) -> datetime | None:
    """When that operator first wrote the Lease with success: its takeover."""
    return next((w.at for w in by(identity, log) if w.to_lease and w.code == 200), None)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
