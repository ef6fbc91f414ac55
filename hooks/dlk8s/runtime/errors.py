"""What can go wrong talking to the API server, one type per failure.

A caller names the failures it expects (``except AlreadyExistsError``) and lets
the rest fail the pass, instead of testing statuses and reasons by hand or
receiving a ``None`` that could mean several things. ``api_error`` maps a
response to its type, as kopf and client-go's ``errors.IsNotFound`` do.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(self, status: int, reason: str, body: dict[str, Any] | None = None) -> None:
        self.status = status  # the HTTP status
        self.reason = reason  # the HTTP reason phrase
        self.body = body or {}  # the decoded Status object, when the server sent one
        super().__init__(f"{status} {reason}: {self.body.get('message', '')}")

    @property
    def api_reason(self) -> str:
        """The Status object's machine-readable reason (AlreadyExists, Conflict, ...)."""
        return str(self.body.get("reason", ""))


class NotFoundError(ApiError):
    """404: the object (or its namespace) does not exist."""


class AlreadyExistsError(ApiError):
    """409 AlreadyExists: a create found an object of that name."""


class ConflictError(ApiError):
    """409 otherwise: a stale resourceVersion or a failed uid precondition."""


class GoneError(ApiError):
    """410: the resourceVersion asked for is compacted; list again."""


class ForbiddenError(ApiError):
    """403: RBAC or an admission rule refused the request."""


class NamespaceTerminatingError(ForbiddenError):
    """403 in a namespace being deleted: the job goes with it, retrying cannot help."""


class InvalidError(ApiError):
    """422: the object fails the API server's validation."""


class BadRequestError(ApiError):
    """400: e.g. a field strict field validation does not know."""


class TransportError(Exception):
    """No answer from the API server: connection refused or reset, a timeout, TLS."""


class FencedError(TransportError):
    """A write not sent: this instance can no longer be sure it holds the
    leader lease (runtime.leader's may_write). Retried like a lost answer;
    the process exits soon after, when the election gives the lease up."""


class TerminalError(Exception):
    """A failure no retry fixes: the controller forgets the key instead of backing off."""


def api_error(status: int, reason: str, body: dict[str, Any]) -> ApiError:
    """The error type of one failed response."""
    return _error_type(status, body)(status, reason, body)


def _error_type(status: int, body: dict[str, Any]) -> type[ApiError]:
    if status == 409:
        return AlreadyExistsError if body.get("reason") == "AlreadyExists" else ConflictError
    if status == 403:
        return NamespaceTerminatingError if _namespace_terminating(body) else ForbiddenError
    return _BY_STATUS.get(status, ApiError)


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    404: NotFoundError,
    410: GoneError,
    422: InvalidError,
}


def is_refusal(err: BaseException) -> bool:
    """Whether the API server refused a request on its merits: admission (Pod
    Security, a quota, a LimitRange, a webhook), RBAC, or validation. Such a
    refusal is the user's to see in the job's status, unlike an outage; a
    namespace being deleted is neither (the job goes with it)."""
    if isinstance(err, NamespaceTerminatingError):
        return False
    if isinstance(err, (BadRequestError, ForbiddenError, InvalidError)):
        return True
    # A webhook's denial carries the code the webhook chose, 500 among them,
    # and its message names the admission webhook. One that cannot be
    # reached fails closed with "failed calling webhook": an outage, retried.
    return isinstance(err, ApiError) and "admission webhook" in str(err.body.get("message", ""))


def _namespace_terminating(body: dict[str, Any]) -> bool:
    # A StatusCause's type travels as "reason" in JSON.
    causes = (body.get("details") or {}).get("causes") or []
    return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)
