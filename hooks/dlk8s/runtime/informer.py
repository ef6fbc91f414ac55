"""An informer: a cache of one resource, kept current by list and watch.

The shape of client-go's reflector and shared informer, in a few hundred
lines we own rather than patches of the Python client's private internals:

- list once (label and field selectors, one namespace or all) in pages of
  500, as client-go's reflector does, keeping each object as its page comes
  (a restart on thousands of pods holds one page of them whole, not all),
  then watch from the resourceVersion of the last event delivered, with
  bookmarks, so a reconnect neither replays the past nor misses an event;
- a watch that ends normally is opened again at once; one that fails is
  opened again after an exponential, jittered back-off (client-go's 0.8 s
  doubling to 30 s, reset after two healthy minutes);
- 410 Gone (in the stream as an ERROR event, or as the HTTP status) means
  the version is compacted: list again, and tell the handlers what the list
  changed (deletes for objects gone, adds and updates for the rest);
- handlers run one by one on the informer's thread with the whole object;
  the cache may keep a transform of it instead (the autoscaler keeps 1 KB
  of each pod, not 50), and a handler that keeps what it is given (the
  controller's index of children) can be given that transform instead, so
  that one copy is kept, not two;
- ``wait_synced`` returns once the first list is in the cache and every
  handler has run on it: a controller whose workers started on a half-filled
  child index would take a restarted operator's pods for lost ones.

The requests themselves go through ``ListWatch`` (``runtime.client.Kube``),
so tests drive this logic with a fake of that, never of the HTTP client.
An informer is built by its user (``Informer(kube, resource, ...)``): the
client, below this module, knows nothing of informers.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from dlk8s.job.objects import Obj
from dlk8s.runtime.apiresources import Resource
from dlk8s.runtime.client import Listing, Scope, Selectors
from dlk8s.runtime.errors import GoneError, api_error

log = logging.getLogger(__name__)

ADDED: Final = "ADDED"
MODIFIED: Final = "MODIFIED"
DELETED: Final = "DELETED"
BOOKMARK: Final = "BOOKMARK"
ERROR: Final = "ERROR"

Handler = Callable[[Obj], None]


# client-go's reflector lists in pages of this many objects.
PAGE_SIZE: Final = 500


class EventStream(Protocol):
    """A watch response: decoded events until the server ends it."""

    def __iter__(self) -> Iterator[Obj]: ...

    def close(self) -> None:
        """Also from another thread, to release a read blocked on a quiet watch."""


class ListWatch(Protocol):
    """What an informer needs of runtime.client.Kube."""

    def list_objects(self, scope: Scope, limit: int = 0, continue_token: str = "") -> Listing:
        """One page of at most `limit` objects (0: all), from `continue_token` on."""

    def watch(self, scope: Scope, resource_version: str, timeout_seconds: int) -> EventStream: ...


class WatchClosedEarlyError(Exception):
    """A watch that ended within a second having sent nothing; opening it again
    at once would spin (client-go's "very short watch")."""


@dataclass
class Backoff:
    """client-go's exponential back-off manager for reflectors."""

    initial: float = 0.8
    cap: float = 30.0
    # Waits of one cycle are spread by up to this share, so informers broken
    # by one API server restart do not all come back at the same instant.
    jitter: float = 1.0
    # A failure this long after the previous one starts again from `initial`:
    # the watch was healthy in between.
    reset_after: float = 120.0
    clock: Callable[[], float] = time.monotonic
    rand: Callable[[], float] = random.random
    _step: float = field(default=0.0, init=False)  # the un-jittered wait of the next failure
    _last: float | None = field(default=None, init=False)  # when the last failure was

    def next(self) -> float:
        """The wait before the next attempt, counting this failure."""
        now = self.clock()
        if self._last is None or now - self._last > self.reset_after:
            self._step = self.initial
        self._last = now
        step, self._step = self._step, min(self.cap, self._step * 2)
        return min(self.cap, step * (1 + self.jitter * self.rand()))


class Cache:
    """Objects (or their transforms) by "namespace/name", read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Any] = {}

    def get_by_key(self, key: str) -> Any | None:
        with self._lock:
            return self._items.get(key)

    def list(self) -> list[Any]:
        with self._lock:
            return list(self._items.values())

    def keys(self) -> set[str]:
        with self._lock:
            return set(self._items)

    def put(self, key: str, value: Any | None) -> None:
        """Keep `value`; None drops the key (a transform that keeps nothing)."""
        with self._lock:
            if value is None:
                self._items.pop(key, None)
            else:
                self._items[key] = value


def key_of(obj: Obj) -> str:
    """client-go's MetaNamespaceKeyFunc: "namespace/name", or "name" if cluster-scoped."""
    meta = obj.get("metadata") or {}
    namespace, name = meta.get("namespace"), meta.get("name", "")
    return f"{namespace}/{name}" if namespace else str(name)


class Informer:
    """One resource (in one namespace or all, under selectors), cached and
    watched on a thread of its own; see the module docstring."""

    def __init__(
        self,
        source: ListWatch,
        resource: Resource,
        namespace: str | None = None,
        selectors: Selectors | None = None,
        transform: Callable[[Obj], Any] | None = None,
        backoff: Backoff | None = None,
        watch_seconds: tuple[int, int] = (300, 600),
        handlers_get_kept: bool = False,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._source = source  # the list and watch calls
        # What is listed and watched: the resource, in one namespace (None:
        # every one), under selectors.
        self._scope = Scope(resource, namespace, selectors or Selectors())
        self._transform = transform  # what the cache keeps of an object; None: all of it
        self._handlers_get_kept = handlers_get_kept  # else they get the whole object
        self._page_size = page_size  # objects per list call
        self._backoff = backoff or Backoff()  # the wait after a failed list or watch
        # The server ends each watch after a random time in this range, as
        # client-go's (5 to 10 minutes), so that watches end at different times.
        self._watch_seconds = watch_seconds
        self.cache = Cache()  # what the users read, from any thread
        # Called on the informer's thread after the cache changed; registered before start().
        self._handlers: dict[str, list[Handler]] = {ADDED: [], MODIFIED: [], DELETED: []}
        # Where the next watch starts: the last event or bookmark delivered.
        # None until the first list, and after a 410: list (again) first.
        self._version: str | None = None
        self._synced = threading.Event()  # the first list is in the cache and handled
        self._stopping = threading.Event()  # stop() was called: the loop ends
        # The watch being read, so that stop() can close it under the reader.
        self._stream: EventStream | None = None
        self._stream_lock = threading.Lock()  # _stream is set by the loop, closed by stop()
        self._thread: threading.Thread | None = None  # the loop's; None until start()
        # Set while failing, so a long outage logs one line, not one per attempt.
        self._broken_since: float | None = None

    @property
    def name(self) -> str:
        namespace = self._scope.namespace
        return self._scope.resource.plural + (f" in {namespace}" if namespace else "")

    def add_event_handler(self, event: str, handler: Handler) -> None:
        """Call handler(obj) on ADDED, MODIFIED or DELETED; register before start()."""
        if event not in self._handlers:
            raise ValueError(f"no such event {event!r}; one of {sorted(self._handlers)}")
        self._handlers[event] = [*self._handlers[event], handler]

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._run, name=f"informer-{self._scope.resource.plural}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 5) -> None:
        """Stop, closing the watch under a read that could block for minutes."""
        self._stopping.set()
        with self._stream_lock:
            stream = self._stream
        if stream is not None:
            stream.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        """False once the thread has died while nobody stopped it (a bug, or a
        BaseException out of a handler): the cache no longer follows."""
        thread = self._thread
        return thread is None or thread.is_alive() or self._stopping.is_set()

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    # -- the loop --------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._list_and_watch()
            except Exception as err:
                if self._stopping.is_set():
                    return
                self._failed(err)

    def _list_and_watch(self) -> None:
        if self._version is None:
            self._relist()  # a 410 here (never seen) is a failure like any other
        try:
            self._watch()
        except GoneError:
            log.info("watch expired; listing again", extra={"target": self.name})
            self._version = None

    def _failed(self, err: Exception) -> None:
        delay = self._backoff.next()
        extra = {"target": self.name, "error": repr(err), "duration": round(delay, 2)}
        if self._broken_since is None:
            self._broken_since = time.monotonic()
            log.warning("watch broken; retrying with back-off", extra=extra)
        else:
            log.debug("watch still broken", extra=extra)
        self._stopping.wait(delay)

    def _recovered(self) -> None:
        if self._broken_since is not None:
            down = round(time.monotonic() - self._broken_since, 1)
            log.info("watch recovered", extra={"target": self.name, "duration": down})
            self._broken_since = None

    def _relist(self) -> None:
        """List page by page; handlers hear what changed since the last list,
        each listed object as its page comes, then what the list lacks."""
        known, listed = self.cache.keys(), set[str]()
        token = ""
        while True:
            page = self._source.list_objects(self._scope, self._page_size, token)
            for obj in page.items:
                key = key_of(obj)
                listed.add(key)
                self._store(MODIFIED if key in known else ADDED, key, obj)
            token = page.continue_token
            if not token:
                break
        for key in known - listed:
            self._fire(DELETED, self._last_seen(key))
            self.cache.put(key, None)
        self._version = page.resource_version
        self._synced.set()
        self._recovered()

    def _last_seen(self, key: str) -> Obj:
        """What a delete handler gets for an object that vanished between watches:
        the cached object if handlers get what is kept (or it is kept whole),
        else only its name."""
        cached = self.cache.get_by_key(key)
        if (self._transform is None or self._handlers_get_kept) and isinstance(cached, dict):
            return cached
        namespace, _, name = key.rpartition("/")
        return {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}

    def _watch(self) -> None:
        assert self._version is not None
        timeout = random.randint(*self._watch_seconds)
        stream = self._source.watch(self._scope, self._version, timeout)
        with self._stream_lock:
            self._stream = stream
        opened, delivered = time.monotonic(), 0
        try:
            if self._stopping.is_set():  # stop() ran before the stream was visible to it
                return
            for event in stream:
                if self._stopping.is_set():
                    return
                self._deliver(event)
                delivered += 1
                if delivered == 1:
                    self._recovered()
        finally:
            with self._stream_lock:
                self._stream = None
            stream.close()
        if not delivered and time.monotonic() - opened < 1:
            raise WatchClosedEarlyError(f"watch of {self.name} closed at once, without events")

    def _deliver(self, event: Obj) -> None:
        kind, obj = event.get("type"), event.get("object")
        if not isinstance(obj, dict):
            raise ValueError(f"watch event without an object: {str(event)[:200]}")
        if kind == ERROR:
            # A Status object; 410 Gone (compacted) becomes GoneError, and a relist.
            raise api_error(int(obj.get("code") or 500), str(obj.get("reason") or ""), obj)
        if kind in (ADDED, MODIFIED):
            self._store(kind, key_of(obj), obj)
        elif kind == DELETED:
            self.cache.put(key_of(obj), None)
            self._fire(DELETED, self._for_handlers(obj, self._kept(obj)))
        elif kind != BOOKMARK:
            log.debug("unknown watch event ignored", extra={"target": self.name, "action": kind})
            return
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self._version = str(version)

    def _store(self, event: str, key: str, obj: Obj) -> None:
        """Keep an added or modified object, then tell the handlers."""
        kept = self._kept(obj)
        self.cache.put(key, kept)
        self._fire(event, self._for_handlers(obj, kept))

    def _kept(self, obj: Obj) -> Any | None:
        return obj if self._transform is None else self._transform(obj)

    def _for_handlers(self, obj: Obj, kept: Any) -> Obj:
        """The kept object if handlers ask for it and it is one, else the whole."""
        return kept if self._handlers_get_kept and isinstance(kept, dict) else obj

    def _fire(self, event: str, obj: Obj) -> None:
        for handler in self._handlers[event]:
            try:
                handler(obj)
            except Exception:  # one handler's bug must not stop the watch
                log.exception(
                    "informer handler failed", extra={"target": self.name, "action": event}
                )
