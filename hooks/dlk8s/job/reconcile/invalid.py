"""The invalid path: a spec the kinds cannot use fails the job as InvalidSpec.

The CRD rejects most bad specs at `kubectl apply`; this catches what slips
through (an older CRD, a bypassed webhook, fields the builders rely on), so
the operator never half-builds a job. The finished path then takes over.
"""

from __future__ import annotations

from dlk8s.job.jobmodel import JobView
from dlk8s.job.kinds import KINDS
from dlk8s.job.objects import show
from dlk8s.job.reconcile.view import Verdict
from dlk8s.job.validation import metadata_problems, run_policy_problems
from dlk8s.job.vocabulary import Reason, State


def spec_problems(job: JobView) -> list[str]:
    if job.kind is None:
        return [f"kind: {show(job.raw.get('kind'))} is not one of {', '.join(KINDS)}"]
    meta = metadata_problems(job.raw)
    return meta + run_policy_problems(job.raw, job.kind.roles) + job.kind.validate(job.raw)


def invalid_verdict(problems: list[str]) -> Verdict:
    return Verdict(State.FAILED, Reason.INVALID_SPEC, "; ".join(problems))
