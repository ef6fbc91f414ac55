"""Each failed response becomes the one error type a caller can name."""

from __future__ import annotations

from typing import Any

import pytest

from dlk8s.runtime import errors
from dlk8s.runtime.errors import api_error

from ..support.fakes import api_status

TERMINATING = {
    **api_status(403, "Forbidden", 'pods "p" is forbidden: namespace ns is being terminated'),
    # as kube-apiserver 1.34 sends it (tests/e2e/kinds/test_informer.py checks it does)
    "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
}


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (404, api_status(404, "NotFound"), errors.NotFoundError),
        (409, api_status(409, "AlreadyExists"), errors.AlreadyExistsError),
        (409, api_status(409, "Conflict", "the object has been modified"), errors.ConflictError),
        (410, api_status(410, "Expired", "too old resource version"), errors.GoneError),
        (403, api_status(403, "Forbidden"), errors.ForbiddenError),
        (403, TERMINATING, errors.NamespaceTerminatingError),
        (422, api_status(422, "Invalid"), errors.InvalidError),
        (500, api_status(500, "InternalError"), errors.ApiError),
        (502, {"message": "<html>bad gateway</html>"}, errors.ApiError),
    ],
)
def test_a_status_and_its_body_make_one_error_type(
    status: int, body: dict[str, Any], expected: type[errors.ApiError]
) -> None:
    err = api_error(status, "Reason Phrase", body)
    assert type(err) is expected
    assert (err.status, err.body) == (status, body)


def test_a_terminating_namespace_is_still_a_forbidden_request() -> None:
    err = api_error(403, "Forbidden", TERMINATING)
    assert isinstance(err, errors.ForbiddenError)
    assert err.api_reason == "Forbidden"
    assert "is being terminated" in str(err)


def test_transport_and_terminal_errors_are_not_answers_of_the_server() -> None:
    assert not issubclass(errors.TransportError, errors.ApiError)
    assert not issubclass(errors.TerminalError, errors.ApiError)


def test_a_webhook_s_denial_is_a_refusal_and_a_webhook_out_of_reach_an_outage() -> None:
    """kube-apiserver's words: a denial names the admission webhook, with the
    code the webhook chose; a call that failed says "failed calling webhook"."""
    denied = 'admission webhook "policy.example.com" denied the request: no GPUs on Fridays'
    unreachable = (
        'Internal error occurred: failed calling webhook "policy.example.com": failed to call'
        ' webhook: Post "https://policy.svc:443/validate": context deadline exceeded'
    )
    assert errors.is_refusal(api_error(500, "Internal Server Error", api_status(500, "x", denied)))
    assert errors.is_refusal(api_error(403, "Forbidden", api_status(403, "Forbidden", denied)))
    assert not errors.is_refusal(
        api_error(500, "Internal Server Error", api_status(500, "InternalError", unreachable))
    )
