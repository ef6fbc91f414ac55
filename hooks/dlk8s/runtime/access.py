"""Who may read /metrics: the API server decides, as for its own endpoints.

The caller's bearer token goes to a TokenReview (authentication.k8s.io/v1),
and the user it names to a SubjectAccessReview (authorization.k8s.io/v1) for
the verb on the non-resource URL (`get` on `/metrics`): what
controller-runtime's WithAuthenticationAndAuthorization does for
kubebuilder's projects, so the same ClusterRole rule (the chart's
metrics-reader) lets a scraper in. No token, or one the API server does not
accept: 401; accepted but not allowed: 403; a review that failed: 500.

The decisions are pure functions of the reviews; the two creates go
through our client (runtime.client.Kube).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Final, Protocol

from dlk8s.runtime.errors import ApiError, TransportError

log = logging.getLogger(__name__)

AUTHENTICATION: Final = "authentication.k8s.io/v1"
AUTHORIZATION: Final = "authorization.k8s.io/v1"

# Reviews are kept for a while, as controller-runtime keeps them (its
# authenticator 1 min; its authorizer 5 min allowed, 30 s denied): a
# Prometheus scraping every 30 s would otherwise cost two API calls per
# scrape and replica. A revoked token or a removed binding takes effect
# within these times. A refused token is kept briefly too, so a client
# that repeats a bad token does not turn each request into a call.
AUTHENTICATED_TTL: Final = 60.0
UNAUTHENTICATED_TTL: Final = 10.0
ALLOWED_TTL: Final = 300.0
DENIED_TTL: Final = 30.0
# Entries at most: a flood of made-up tokens cannot grow the cache for ever.
CACHE_SIZE: Final = 1024


class Reviews(Protocol):
    """What this needs of runtime.client.Kube."""

    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True)
class User:
    """Who a TokenReview says the token belongs to."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None otherwise."""
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def token_review(token: str) -> dict[str, Any]:
    return {"apiVersion": AUTHENTICATION, "kind": "TokenReview", "spec": {"token": token}}


def user_of(review: dict[str, Any]) -> User | None:
    """The authenticated user of an answered TokenReview; None when it was not."""
    status = review.get("status") or {}
    user = status.get("user") or {}
    if status.get("authenticated") is not True or not user.get("username"):
        return None
    extra = user.get("extra") or {}
    return User(
        name=str(user["username"]),
        uid=str(user.get("uid") or ""),
        groups=tuple(user.get("groups") or ()),
        extra=tuple(sorted((k, tuple(v or ())) for k, v in extra.items())),
    )


def access_review(user: User, path: str, verb: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "user": user.name,
        "groups": list(user.groups),
        "nonResourceAttributes": {"path": path, "verb": verb},
    }
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra}
    return {"apiVersion": AUTHORIZATION, "kind": "SubjectAccessReview", "spec": spec}


def allowed(review: dict[str, Any]) -> bool:
    status = review.get("status") or {}
    return status.get("allowed") is True and status.get("denied") is not True


class Expiring:
    """Answers kept until their time is up, CACHE_SIZE at most; shared by
    the server's connection threads, hence the lock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[Hashable, tuple[float, Any]] = {}

    def get(self, key: Hashable) -> tuple[Any] | None:
        """(value,) while it is kept, else None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry[0] <= self._clock():
                return None
            return (entry[1],)

    def put(self, key: Hashable, value: Any, ttl: float) -> None:
        with self._lock:
            now = self._clock()
            if len(self._entries) >= CACHE_SIZE:
                self._entries = {k: e for k, e in self._entries.items() if e[0] > now}
            if len(self._entries) >= CACHE_SIZE:
                self._entries.clear()  # all still fresh: a flood; start over
            self._entries[key] = (now + ttl, value)


class MetricsAccess:
    """`check` is runtime.serving's Authorize: the HTTP status for a request."""

    def __init__(self, kube: Reviews, clock: Callable[[], float] = time.monotonic) -> None:
        self._kube = kube
        self._users = Expiring(clock)
        self._decisions = Expiring(clock)

    def check(self, header: str | None, path: str, verb: str) -> int:
        token = bearer_token(header)
        if token is None:
            return 401
        try:
            user = self._user(token)
            if user is None:
                return 401
            return 200 if self._allowed(user, path, verb) else 403
        except (ApiError, TransportError) as err:
            # The caller learns only that it failed; why is ours to read.
            log.warning("metrics access review failed", extra={"error": str(err)})
            return 500

    def _user(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()  # no token kept in memory
        kept = self._users.get(key)
        if kept is not None:
            known: User | None = kept[0]
            return known
        user = user_of(self._kube.create(token_review(token)))
        self._users.put(key, user, AUTHENTICATED_TTL if user else UNAUTHENTICATED_TTL)
        return user

    def _allowed(self, user: User, path: str, verb: str) -> bool:
        key = (user, path, verb)
        kept = self._decisions.get(key)
        if kept is not None:
            return bool(kept[0])
        answer = allowed(self._kube.create(access_review(user, path, verb)))
        self._decisions.put(key, answer, ALLOWED_TTL if answer else DENIED_TTL)
        return answer
