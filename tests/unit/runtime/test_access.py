"""Who may read /metrics (runtime.access): the statuses from the reviews'
answers, what the reviews ask, and what is kept how long. The API server's
answers come from a fake of our own client wrapper; tests/e2e/operator/test_metrics.py
asks a real kube-apiserver."""

from __future__ import annotations

from typing import Any

from dlk8s.runtime.access import (
    ALLOWED_TTL,
    AUTHENTICATED_TTL,
    DENIED_TTL,
    MetricsAccess,
    User,
    access_review,
    bearer_token,
    user_of,
)
from dlk8s.runtime.errors import TransportError, api_error

ALICE = {"username": "alice", "uid": "u1", "groups": ["team-a"], "extra": {"k": ["v"]}}


class Reviews:
    """Answers TokenReviews from `tokens` (token -> user) and
    SubjectAccessReviews from `allowed` (user names); records each create."""

    def __init__(self, tokens: dict[str, dict[str, Any]], allowed: set[str]) -> None:
        self.tokens = tokens
        self.allowed = allowed
        self.created: list[dict[str, Any]] = []
        self.failure: Exception | None = None

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.created.append(obj)
        if self.failure is not None:
            raise self.failure
        if obj["kind"] == "TokenReview":
            user = self.tokens.get(obj["spec"]["token"])
            return {**obj, "status": {"authenticated": True, "user": user} if user else {}}
        return {**obj, "status": {"allowed": obj["spec"]["user"] in self.allowed}}

    def kinds(self) -> list[str]:
        return [o["kind"] for o in self.created]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_bearer_token_of_a_header() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token(None) is None
    assert bearer_token("Bearer ") is None
    assert bearer_token("Basic YWxpY2U6c2VjcmV0") is None


def test_the_statuses_401_403_and_200() -> None:
    reviews = Reviews({"a": ALICE, "b": {"username": "bob"}}, allowed={"alice"})
    access = MetricsAccess(reviews)
    assert access.check(None, "/metrics", "get") == 401
    assert reviews.created == []  # no token, no call
    assert access.check("Bearer nobody", "/metrics", "get") == 401
    assert reviews.kinds() == ["TokenReview"]  # not authenticated: nothing to authorize
    assert access.check("Bearer b", "/metrics", "get") == 403
    assert access.check("Bearer a", "/metrics", "get") == 200


def test_the_access_review_asks_for_the_non_resource_url_as_the_user() -> None:
    user = user_of({"status": {"authenticated": True, "user": ALICE}})
    assert user == User("alice", "u1", ("team-a",), (("k", ("v",)),))
    assert access_review(user, "/metrics", "get") == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "alice",
            "uid": "u1",
            "groups": ["team-a"],
            "extra": {"k": ["v"]},
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        },
    }
    assert user_of({"status": {"authenticated": False, "user": ALICE}}) is None
    assert user_of({"status": {}}) is None


def test_answers_are_kept_for_a_while_then_asked_again() -> None:
    clock = Clock()
    reviews = Reviews({"a": ALICE, "b": {"username": "bob"}}, allowed={"alice"})
    access = MetricsAccess(reviews, clock)
    assert access.check("Bearer a", "/metrics", "get") == 200
    assert access.check("Bearer a", "/metrics", "get") == 200
    assert reviews.kinds() == ["TokenReview", "SubjectAccessReview"]
    clock.now += AUTHENTICATED_TTL + 1  # the token is reviewed again, the decision kept
    assert access.check("Bearer a", "/metrics", "get") == 200
    assert reviews.kinds() == ["TokenReview", "SubjectAccessReview", "TokenReview"]
    clock.now += ALLOWED_TTL
    reviews.allowed.clear()  # the binding removed: refused once the decision expires
    assert access.check("Bearer a", "/metrics", "get") == 403
    # A refusal is kept for less time than an allowance.
    assert access.check("Bearer b", "/metrics", "get") == 403
    reviews.allowed.add("bob")
    assert access.check("Bearer b", "/metrics", "get") == 403
    clock.now += DENIED_TTL + 1
    assert access.check("Bearer b", "/metrics", "get") == 200


def test_a_failed_review_is_a_500_and_not_kept() -> None:
    reviews = Reviews({"a": ALICE}, allowed={"alice"})
    access = MetricsAccess(reviews)
    reviews.failure = TransportError("connection refused")
    assert access.check("Bearer a", "/metrics", "get") == 500
    reviews.failure = api_error(403, "Forbidden", {"message": "cannot create tokenreviews"})
    assert access.check("Bearer a", "/metrics", "get") == 500
    reviews.failure = None
    assert access.check("Bearer a", "/metrics", "get") == 200
