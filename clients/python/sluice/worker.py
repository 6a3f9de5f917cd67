"""A worker pool: runs a handler over the messages of a queue.

The pool takes its messages over a consumer stream (``docs/streams.md``): its
credit is ``concurrency + prefetch``, so the broker pushes a message only when
the pool has room for it, and keeps the leases of what the stream holds alive
while the stream lives (up to its maximum hold). Each handler runs on one of
``concurrency`` threads.

A handler takes a :class:`sluice.Message`. What it does decides what becomes of
the message (:func:`outcome_of` is the one rule):

- it returns: **ack** (the message is deleted);
- it raises :class:`RetryAfter` ``(seconds, reason)``: a nack, back after
  exactly that long (the attempt counts);
- it raises :class:`Snooze` ``(seconds)``: back after that long, the attempt
  does not count;
- it raises :class:`DeadLetterNow` ``(reason)``: to the dead-letter queue at
  once (the queue needs a RedrivePolicy);
- it raises any other exception: a **nack** with the exception's text as the
  reason (its class name when the text is empty); the queue's RetryPolicy
  decides when it comes back, and past its last attempt it moves to the
  dead-letter queue with that reason.

Reasons are cut to 1 KiB, delays to 12 h. :func:`json_handler` decodes a JSON
body first (a body that does not decode is dead-lettered at once).

Stopping (:meth:`Worker.stop`, or SIGTERM/SIGINT under :meth:`Worker.run`):
the credit goes to 0, the messages delivered and not started are released
(the attempt does not count), the running handlers finish within the grace
and settle, and a handler still running when the grace ends has its message
released (its outcome, when it comes, is dropped). Then the stream closes,
holding nothing.

When the stream ends (the broker restarted, the connection was cut), the
pool opens a new one with a backoff (0.1 s doubling to 10 s); the outcomes of
the handlers that were running go through the native HTTP API with their
receipts (a broker that went away left their leases to run), and a heartbeat
extends those leases meanwhile.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import signal
import socket
import threading
import time
from typing import Any, Callable

from . import trace
from .client import Client, Message
from .errors import SluiceError, StreamEnded
from .stream import Consumer, StreamClient, message_from_pb

__all__ = [
    "Worker",
    "RetryAfter",
    "Snooze",
    "DeadLetterNow",
    "Outcome",
    "outcome_of",
    "clean_reason",
    "json_handler",
    "MAX_REASON_BYTES",
    "MAX_DELAY_SECONDS",
]

MAX_REASON_BYTES = 1024
"""The longest failure reason Sluice keeps: a longer one is cut."""

MAX_DELAY_SECONDS = 43200
"""The longest delay of a snooze or retry-after (12 h): a longer one is cut."""

log = logging.getLogger("sluice.worker")


class RetryAfter(Exception):
    """Raised by a handler: a failed attempt, visible again after exactly
    ``seconds`` (instead of the queue's RetryPolicy backoff), with
    ``reason``."""

    def __init__(self, seconds: float, reason: str = ""):
        super().__init__(reason or f"retry after {seconds}s")
        self.seconds = seconds
        self.reason = reason or f"retry after {seconds}s"


class Snooze(Exception):
    """Raised by a handler: hand the message back for ``seconds``; the
    attempt does not count."""

    def __init__(self, seconds: float):
        super().__init__(f"snooze {seconds}s")
        self.seconds = seconds


class DeadLetterNow(Exception):
    """Raised by a handler: the message can never succeed; move it to the
    queue's dead-letter queue now, with ``reason``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Outcome:
    """What becomes of a message: ``kind`` is ``"ack"``, ``"nack"``,
    ``"snooze"``, ``"release"`` or ``"dead-letter"``; ``reason`` (nack,
    dead-letter) and ``delay`` (whole seconds; None on a nack: the queue's
    RetryPolicy)."""

    __slots__ = ("kind", "reason", "delay")

    def __init__(self, kind: str, reason: str = "", delay: int | None = None):
        self.kind, self.reason, self.delay = kind, reason, delay

    def __eq__(self, other):
        return isinstance(other, Outcome) and (self.kind, self.reason, self.delay) == (other.kind, other.reason, other.delay)

    def __repr__(self):
        return f"Outcome({self.kind!r}, {self.reason!r}, {self.delay!r})"


def clean_reason(s: str) -> str:
    """Makes ``s`` a valid failure reason for every broker: characters outside
    XML 1.0's set become U+FFFD, and it is cut to 1 KiB (UTF-8) at a
    character's boundary."""
    s = "".join(ch if ch in "\t\n\r" or 0x20 <= ord(ch) <= 0xD7FF or 0xE000 <= ord(ch) <= 0xFFFD
                or ord(ch) >= 0x10000 else "\ufffd" for ch in s)
    b = s.encode()
    if len(b) <= MAX_REASON_BYTES:
        return s
    return b[:MAX_REASON_BYTES].decode(errors="ignore")


def _seconds(d: float) -> int:
    # The stream's unit is the second: round up, so a short delay is never 0.
    return int(min(max(-(-d // 1), 0), MAX_DELAY_SECONDS))


def outcome_of(exc: BaseException | None) -> Outcome:
    """The outcome of a handler's result: None (it returned) is an ack; the
    control exceptions theirs; any other exception a nack with its text."""
    if exc is None:
        return Outcome("ack")
    if isinstance(exc, DeadLetterNow):
        return Outcome("dead-letter", clean_reason(exc.reason))
    if isinstance(exc, Snooze):
        return Outcome("snooze", delay=_seconds(exc.seconds))
    if isinstance(exc, RetryAfter):
        return Outcome("nack", clean_reason(exc.reason), _seconds(exc.seconds))
    return Outcome("nack", clean_reason(str(exc) or type(exc).__name__))


def json_handler(fn: Callable[[Message, Any], Any]) -> Callable[[Message], Any]:
    """Wraps ``fn(message, payload)`` into a handler that decodes the body as
    JSON first. A body that does not decode can never succeed: it is
    dead-lettered at once with the decode error as the reason (fix it in the
    dead-letter queue and replay it)."""

    @functools.wraps(fn)
    def handler(m: Message):
        try:
            payload = json.loads(m.body)
        except ValueError as e:
            raise DeadLetterNow(f"the body is not JSON: {e}") from e
        return fn(m, payload)

    return handler


class _Held:
    """A message the pool holds: received from a stream, not yet settled."""

    __slots__ = ("m", "con", "at", "state")

    def __init__(self, m: Message, con: Consumer, at: float):
        self.m, self.con, self.at = m, con, at
        self.state = "running"  # "running", "settling", "abandoned"


class Worker:
    """Runs ``handler`` over the messages of ``queue`` on the broker ``client``
    talks to (its address and token are the stream's).

    Args:
        concurrency: handlers that run at once (threads), 1..10000.
        prefetch: messages held delivered but not started, beyond the
            running ones (0: a busy pool takes only what it can start now,
            leaving the rest to other workers). The stream's credit is
            ``concurrency + prefetch``.
        lease_seconds: each delivery's lease, which the broker extends while
            the stream lives (0: the queue's VisibilityTimeout).
        max_hold_seconds: how long the broker keeps extending one message's
            lease (0: one hour). A handler still running past it loses its
            message: it goes back to the queue, and the handler's outcome is
            not applied.
        client_name: the stream's name in the queue's consumer list (default
            ``sluice-worker-py HOST/PID``).
        grace_seconds: how long :meth:`run` lets running handlers finish on
            SIGTERM.
    """

    def __init__(self, client: Client, queue: str, handler: Callable[[Message], Any], *, concurrency: int = 10,
                 prefetch: int = 0, lease_seconds: int = 30, max_hold_seconds: int = 0,
                 client_name: str | None = None, grace_seconds: float = 30.0,
                 logger: logging.Logger | None = None):
        if not 1 <= concurrency <= 10000:
            raise ValueError(f"concurrency {concurrency}: want 1..10000")
        if not 0 <= prefetch <= 10000 - concurrency:
            raise ValueError(f"prefetch {prefetch}: want 0..{10000 - concurrency} (the credit is at most 10000)")
        if not 0 <= lease_seconds <= 43200 or not 0 <= max_hold_seconds <= 43200:
            raise ValueError("lease_seconds and max_hold_seconds: want 0..43200")
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.prefetch = prefetch
        self.lease_seconds = lease_seconds
        self.max_hold_seconds = max_hold_seconds
        self.client_name = client_name or f"sluice-worker-py {socket.gethostname()}/{os.getpid()}"
        self.grace_seconds = grace_seconds
        self.log = logger or log
        self._streams: StreamClient | None = None  # the connection of the stream in use
        self._lock = threading.Condition()
        self._con: Consumer | None = None
        self._held: dict[str, _Held] = {}
        self._stopping = False
        self._started = False
        self._stopped = threading.Event()
        self._stop_requested = threading.Event()
        self._threads: list[threading.Thread] = []
        self._running = 0
        self.handled = 0
        self.failed = 0
        self.lost = 0
        self.released = 0

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Starts the pool's threads and returns: the stream opens (with
        retries) in the background."""
        with self._lock:
            if self._started:
                raise RuntimeError("a Worker starts once; make another to run again")
            self._started = True
        self._spawn(self._supervise, "sluice-stream")
        self._spawn(self._heartbeat, "sluice-heartbeat")
        for i in range(self.concurrency):
            self._spawn(self._handle_loop, f"sluice-handler-{i}")

    def _spawn(self, fn, name):
        t = threading.Thread(target=fn, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def run(self, install_signal_handlers: bool = True) -> None:
        """Starts the pool and blocks until it has stopped: on SIGTERM or
        SIGINT (when ``install_signal_handlers``, from the main thread), or
        :meth:`stop` from another thread. On a signal it stops gracefully
        within ``grace_seconds``."""
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self._stop_requested.set())
        self.start()
        # Event.wait is interrupted by a signal on the main thread: the
        # handler sets the event, and the stop runs here, not in the handler.
        self._stop_requested.wait()
        self.stop(self.grace_seconds)

    def stats(self) -> dict:
        """The pool's counts: ``running``, ``held`` (running and settling),
        ``handled`` (handlers that returned), ``failed`` (that raised),
        ``lost`` (outcomes not applied: the lease had ended), ``released``
        (messages handed back unstarted or at the grace's end)."""
        with self._lock:
            return {"running": self._running, "held": len(self._held), "handled": self.handled,
                    "failed": self.failed, "lost": self.lost, "released": self.released}

    def stop(self, grace: float = 30.0) -> bool:
        """Stops the pool gracefully and waits for it: no new message starts,
        the delivered and unstarted ones are released, the running handlers
        get ``grace`` seconds to finish and settle; the messages of those
        still running then are released (their outcomes dropped), and the
        stream is closed. Returns whether every handler finished in time.
        A second call waits for the first."""
        self._stop_requested.set()
        with self._lock:
            first = not self._stopping
            self._stopping = True
            con = self._con
            self._lock.notify_all()
        if not first:
            self._stopped.wait()
            return True
        if con is not None and con.live():
            con.set_credit(0)
            # An empty settle's answer comes after the broker has read the
            # credit frame before it and sent every message it handed the
            # stream: all have arrived by then (a broker older than that
            # barrier may still push a few; a release before the close
            # catches them).
            try:
                con.settle([], timeout=10)
            except SluiceError:
                pass
            self._release([message_from_pb(self.queue, m) for m in con.take_delivered()], con)
            con.wake(self.concurrency)
        deadline = time.monotonic() + grace
        finished = True
        with self._lock:
            while self._running > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    finished = False
                    break
                self._lock.wait(left)
            abandoned = [h for h in self._held.values() if h.state == "running"]
            for h in abandoned:
                h.state = "abandoned"
                del self._held[h.m.receipt]
            # The outcomes being sent go out before the stream closes (a
            # close would hand their messages back as failures): up to 10 s.
            settle_by = time.monotonic() + 10
            while any(h.state == "settling" for h in self._held.values()) and time.monotonic() < settle_by:
                self._lock.wait(settle_by - time.monotonic())
        if abandoned:
            self.log.warning("sluice worker: the grace ended with %d handlers running; their messages are released",
                             len(abandoned))
            for h in abandoned:
                self._apply(h, Outcome("release"))
            with self._lock:
                self.released += len(abandoned)
        with self._lock:
            con = self._con
            self._con = None
            self._lock.notify_all()
        if con is not None:
            # A delivery that came after the first release would go back as a
            # failed attempt ("consumer disconnected") with the close.
            if con.live():
                self._release([message_from_pb(self.queue, m) for m in con.take_delivered()], con)
            con.close()
        with self._lock:
            sc, self._streams = self._streams, None
        if sc is not None:
            sc.close()
        self._stopped.set()
        return finished

    # -- the stream --------------------------------------------------------

    def _supervise(self) -> None:
        """Keeps a stream open while the pool runs: opens one, waits for its
        end, opens another after a backoff."""
        failures = 0
        rng = random.Random()
        while True:
            with self._lock:
                if self._stopping:
                    return
            # Each stream gets a connection of its own, as the Go worker's: a
            # new one connects at once, where a channel whose broker went away
            # waits out its reconnect backoff.
            sc = StreamClient(self.client.base_url, token=self.client.token)
            try:
                con = sc.consume(self.queue, self.concurrency + self.prefetch, lease_seconds=self.lease_seconds,
                                 max_hold_seconds=self.max_hold_seconds, client_name=self.client_name)
            except StreamEnded as e:
                sc.close()
                failures += 1
                d = min(0.1 * 2 ** min(failures - 1, 7), 10.0)
                d = d / 2 + rng.uniform(0, d / 2)
                self.log.error("sluice worker: opening a stream on %s failed (%s); retrying in %.1fs",
                               self.queue, e, d)
                if self._stop_requested_or_stopping(d):
                    return
                continue
            failures = 0
            with self._lock:
                if self._stopping:
                    con.close()
                    sc.close()
                    return
                old, self._streams = self._streams, sc
                self._con = con
                self._lock.notify_all()
            if old is not None:
                old.close()
            con.wait_ended()
            with self._lock:
                if self._con is con:
                    self._con = None
                    self._lock.notify_all()
                if self._stopping:
                    return
            self.log.warning("sluice worker: the stream on %s ended (%s); opening another", self.queue, con.err)

    def _stop_requested_or_stopping(self, d: float) -> bool:
        with self._lock:
            self._lock.wait_for(lambda: self._stopping, d)
            return self._stopping

    def _current(self) -> Consumer | None:
        with self._lock:
            self._lock.wait_for(lambda: self._stopping or (self._con is not None and self._con.live()))
            return None if self._stopping else self._con

    # -- handlers ----------------------------------------------------------

    def _handle_loop(self) -> None:
        while True:
            con = self._current()
            if con is None:
                return
            try:
                pm = con.receive()
            except StreamEnded:
                with self._lock:
                    if self._con is con:
                        self._lock.wait_for(lambda: self._stopping or self._con is not con)
                continue
            if pm is None:
                continue
            m = message_from_pb(self.queue, pm)
            with self._lock:
                if self._stopping:
                    late = True
                else:
                    late = False
                    h = _Held(m, con, time.monotonic())
                    self._held[m.receipt] = h
                    self._running += 1
            if late:
                self._release([m], con)
                continue
            try:
                self._handle(h)
            finally:
                with self._lock:
                    self._running -= 1
                    self._lock.notify_all()

    def _handle(self, h: _Held) -> None:
        m = h.m
        exc = None
        with trace.use(m.trace_context):
            try:
                self.handler(m)
            except Exception as e:  # the handler's failure is the message's outcome
                exc = e
        o = outcome_of(exc)
        with self._lock:
            if exc is None:
                self.handled += 1
            else:
                self.failed += 1
            if h.state == "abandoned":
                self.log.warning("sluice worker: a handler ended after the grace; its message %s was released, "
                                 "its outcome %s is dropped", m.id, o.kind)
                return
            h.state = "settling"
        if exc is not None and o.kind != "release":
            self.log.info("sluice worker: handler failed: message %s, attempt %d, outcome %s: %s",
                          m.id, m.attempts, o.kind, o.reason or exc)
        hold = h.con.max_hold_seconds or 3600
        if time.monotonic() - h.at >= hold:
            with self._lock:
                self._held.pop(m.receipt, None)
                self.lost += 1
            self.log.warning("sluice worker: message %s was held past the stream's maximum hold (%ds): its lease "
                             "ended and it is delivered again; outcome %s not applied", m.id, hold, o.kind)
            return
        self._apply(h, o)
        with self._lock:
            self._held.pop(m.receipt, None)
            self._lock.notify_all()

    def _apply(self, h: _Held, o: Outcome) -> None:
        """Settles h's message: on its stream while that lives, else through
        the native API."""
        m = h.m
        try:
            if h.con.live():
                try:
                    self._settle_stream(h.con, m, o)
                    return
                except StreamEnded:
                    pass  # the stream ended first: its leases run on
            self._settle_native(m, o)
        except SluiceError as e:
            lost = e.code in ("message_not_in_flight", "invalid_receipt") or (
                e.code == "invalid_parameter" and ("not held" in e.message or "receipt" in e.message.lower()))
            with self._lock:
                if lost:
                    self.lost += 1
            if lost:
                self.log.warning("sluice worker: the lease of message %s ended before its outcome (%s); it will be "
                                 "delivered again: %s", m.id, o.kind, e)
            else:
                self.log.error("sluice worker: applying outcome %s to message %s failed: %s", o.kind, m.id, e)

    @staticmethod
    def _settle_stream(con: Consumer, m: Message, o: Outcome) -> None:
        if o.kind == "ack":
            con.ack(m.receipt)
        elif o.kind == "nack":
            con.nack(m.receipt, o.reason, o.delay)
        elif o.kind == "snooze":
            con.snooze(m.receipt, o.delay or 0)
        elif o.kind == "release":
            con.release(m.receipt)
        elif o.kind == "dead-letter":
            con.dead_letter(m.receipt, o.reason)

    def _settle_native(self, m: Message, o: Outcome) -> None:
        c = self.client
        if o.kind == "ack":
            c.ack(self.queue, m.receipt)
        elif o.kind == "nack":
            c.nack(self.queue, m.receipt, o.reason, o.delay)
        elif o.kind == "snooze":
            c.snooze(self.queue, m.receipt, o.delay or 0)
        elif o.kind == "release":
            c.release(self.queue, m.receipt)
        elif o.kind == "dead-letter":
            c.dead_letter(self.queue, m.receipt, o.reason)

    def _release(self, msgs: list[Message], con: Consumer) -> None:
        """Hands back messages never started (the attempt does not count)."""
        if not msgs:
            return
        from .stream import pb

        errs = None
        if con.live():
            try:
                errs = con.settle([pb.Settlement(receipt=m.receipt, release=pb.Release()) for m in msgs])
            except StreamEnded:
                errs = None
        if errs is None:
            for m in msgs:
                try:
                    self.client.release(self.queue, m.receipt)
                except SluiceError as e:
                    self.log.warning("sluice worker: releasing message %s: %s", m.id, e)
        with self._lock:
            self.released += len(msgs)
        self.log.info("sluice worker: released %d unstarted messages", len(msgs))

    # -- heartbeat ---------------------------------------------------------

    def _heartbeat(self) -> None:
        """Extends, through the native API, the leases of the running
        messages whose stream has ended (a live stream's broker keeps
        them)."""
        lease = self.lease_seconds or 30
        every = max(lease / 3, 1)
        while not self._stop_requested_or_stopping(every):
            with self._lock:
                orphans = [h for h in self._held.values() if h.state == "running" and not h.con.live()]
            for h in orphans:
                try:
                    self.client.extend(self.queue, h.m.receipt, lease)
                except SluiceError as e:
                    self.log.warning("sluice worker: extending the lease of message %s: %s", h.m.id, e)
