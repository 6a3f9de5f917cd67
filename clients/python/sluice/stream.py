"""The client of Sluice's stream API (``docs/streams.md``): gRPC on the broker's
own port.

- :meth:`StreamClient.publisher` opens a ``Publish`` stream: sends are
  pipelined, each confirmed once durable (:class:`Publisher`).
- :meth:`StreamClient.consume` opens a ``Consume`` stream on a queue with a
  credit (its prefetch): the broker pushes leased messages while the stream
  holds fewer than its credit, keeps their leases alive while the stream
  lives, and takes settlements (ack, nack, extend, snooze, release,
  dead-letter) on the same stream (:class:`Consumer`). When the stream ends,
  the broker hands back at once what it still held.

The messages are the code ``protoc`` 3.21 generates from the repository's
``stream.proto`` (``sluice._proto.stream_pb2``, checked in); the two methods
are called through grpc's generic API, so no gRPC plugin is needed.
"""

from __future__ import annotations

import base64
import concurrent.futures
import itertools
import queue as queue_mod
import threading
import urllib.parse
from typing import Any, Iterable, Mapping

import grpc

from ._proto import stream_pb2 as pb
from .client import Attribute, Message, SendResult, envelope
from .errors import SluiceError, StreamEnded

__all__ = ["StreamClient", "Publisher", "Consumer", "pb", "message_from_pb"]

_PUBLISH = "/sluice.stream.v1.Streams/Publish"
_CONSUME = "/sluice.stream.v1.Streams/Consume"

# The broker pings a quiet connection after 5 s and lets clients ping every
# 5 s, no more often (docs/streams.md, Connecting): ping every 10 s, so a
# broker or network gone away is noticed without being taken for abuse.
_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 0),
    ("grpc.max_receive_message_length", 4 << 20),
    # gRPC's own reconnect backoff (1 s growing to 120 s by default) would
    # hold a new stream long after a restarted broker is back: 0.1 s growing
    # to 10 s, as the worker's. (grpc.min_reconnect_backoff_ms is also the
    # connect timeout: it stays at its 20 s.)
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 10_000),
]

_END = object()
_WAKE = object()


def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = n = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        if c < 0x80:
            return n, i
        shift += 7


def _fields(b: bytes) -> list[tuple[int, Any]]:
    """The fields of an encoded protobuf message (number, value), enough to
    read a google.rpc.Status without its generated code."""
    out, i = [], 0
    while i < len(b):
        key, i = _varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("unsupported wire type")
        out.append((num, v))
    return out


def _reason(e: grpc.RpcError) -> str:
    """The google.rpc.ErrorInfo reason of a status's details ("" if none)."""
    try:
        md = e.trailing_metadata() or ()
    except Exception:  # a status without trailers
        return ""
    for k, v in md:
        if k != "grpc-status-details-bin":
            continue
        try:
            for num, anyb in _fields(v):
                if num != 3:  # Status.details
                    continue
                parts = dict(_fields(anyb))  # Any: 1 type_url, 2 value
                if bytes(parts.get(1, b"")).endswith(b"google.rpc.ErrorInfo"):
                    info = dict(_fields(parts.get(2, b"")))  # ErrorInfo: 1 reason
                    return bytes(info.get(1, b"")).decode()
        except (ValueError, IndexError):
            return ""
    return ""


def _ended(e: grpc.RpcError) -> StreamEnded:
    code = e.code() if hasattr(e, "code") else None
    reason = _reason(e) or (code.name.lower() if code is not None else "unknown")
    details = e.details() if hasattr(e, "details") else str(e)
    return StreamEnded(reason, details or "", code)


def _target(endpoint: str) -> tuple[str, bool]:
    u = urllib.parse.urlsplit(endpoint if "://" in endpoint else "http://" + endpoint)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise ValueError(f"endpoint {endpoint!r}: want host:port, http://host:port or https://host:port")
    port = u.port or (443 if u.scheme == "https" else 80)
    return f"{u.hostname}:{port}", u.scheme == "https"


def _pb_envelope(m: str | Mapping[str, Any] | pb.Envelope) -> pb.Envelope:
    if isinstance(m, pb.Envelope):
        return m
    e = envelope(m) if isinstance(m, str) else envelope(**m)
    out = pb.Envelope(body=e["body"])
    for name, a in (e.get("attributes") or {}).items():
        if a["type"].startswith("Binary"):
            out.attributes[name].CopyFrom(pb.Attribute(type=a["type"], binary_value=base64.b64decode(a["value"])))
        else:
            out.attributes[name].CopyFrom(pb.Attribute(type=a["type"], string_value=a["value"]))
    for key, field in (("priority", "priority"), ("maxAttempts", "max_attempts"), ("ttlSeconds", "ttl_seconds"),
                       ("correlationId", "correlation_id"), ("traceContext", "trace_context"),
                       ("delaySeconds", "delay_seconds"), ("groupId", "group_id"), ("dedupId", "dedup_id")):
        if key in e:
            setattr(out, field, e[key])
    return out


def message_from_pb(queue: str, m: pb.Message) -> Message:
    """A delivered stream message as a :class:`sluice.Message`."""
    attrs = {}
    for name, a in m.attributes.items():
        attrs[name] = Attribute(a.type, a.binary_value if a.type.startswith("Binary") else a.string_value)
    return Message(
        id=m.id, body=m.body, receipt=m.receipt, queue=queue, attributes=attrs, priority=m.priority,
        attempts=m.attempts, receive_count=m.receive_count, max_attempts=m.max_attempts,
        correlation_id=m.correlation_id, trace_context=m.trace_context, group_id=m.group_id,
        dedup_id=m.dedup_id, sequence_number=m.sequence_number, failure_reason=m.failure_reason,
        ttl_seconds=m.ttl_seconds, sent_at=m.sent_at_unix_ms / 1000.0,
    )


class _Requests:
    """A request iterator fed from other threads: grpc reads it in its own
    thread; close() ends it, which half-closes the stream."""

    def __init__(self):
        self._q: queue_mod.SimpleQueue = queue_mod.SimpleQueue()

    def put(self, req) -> None:
        self._q.put(req)

    def close(self) -> None:
        self._q.put(_END)

    def __iter__(self):
        return self

    def __next__(self):
        r = self._q.get()
        if r is _END:
            raise StopIteration
        return r


class StreamClient:
    """One HTTP/2 connection to a broker's stream API, shared by its streams.

    ``endpoint`` is ``host:port``, ``http://host:port`` (plaintext, the
    broker's default) or ``https://host:port`` (a broker with
    ``--tls-cert``; ``root_certificates`` a PEM bundle for a private CA).
    ``token`` is ``"ACCESS_KEY_ID:SECRET"`` on a broker with keys (a key
    allowed ``native:write``). Safe to share between threads; close it when
    done.
    """

    def __init__(self, endpoint: str = "127.0.0.1:9324", *, token: str | None = None,
                 root_certificates: bytes | None = None, user_agent: str = "sluice-python"):
        target, tls = _target(endpoint)
        options = _CHANNEL_OPTIONS + [("grpc.primary_user_agent", user_agent)]
        if tls:
            creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(target, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._metadata = (("authorization", "Bearer " + token),) if token else ()
        self._publish = self._channel.stream_stream(
            _PUBLISH, request_serializer=pb.PublishRequest.SerializeToString,
            response_deserializer=pb.PublishConfirm.FromString)
        self._consume = self._channel.stream_stream(
            _CONSUME, request_serializer=pb.ConsumeRequest.SerializeToString,
            response_deserializer=pb.ConsumeResponse.FromString)

    def publisher(self) -> "Publisher":
        """Opens a Publish stream."""
        return Publisher(self._publish, self._metadata)

    def consume(self, queue: str, credit: int, *, lease_seconds: int = 0, max_hold_seconds: int = 0,
                client_name: str = "", timeout: float = 30.0) -> "Consumer":
        """Opens a Consume stream on ``queue`` with ``credit`` (0..10000: how
        many unsettled messages it may hold), each delivery leased for
        ``lease_seconds`` (0: the queue's VisibilityTimeout) and kept alive
        by the broker for up to ``max_hold_seconds`` (0: one hour).
        ``client_name`` names it in the queue's consumer list. Returns once
        the broker has answered the open; raises :class:`StreamEnded` with
        the broker's reason (``queue_not_found``, ``invalid_parameter``, ...)
        when it refused it."""
        op = pb.Open(queue=queue, credit=credit, lease_seconds=lease_seconds, max_hold_seconds=max_hold_seconds,
                     client_name=client_name)
        return Consumer(self._consume, self._metadata, queue, op, timeout)

    def close(self) -> None:
        """Closes the connection, ending every stream on it."""
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Publisher:
    """A Publish stream: :meth:`publish_async` pipelines sends on one stream,
    each confirmed once durable (match by future, not by order: confirms may
    overtake one another). Safe for concurrent use."""

    def __init__(self, method, metadata):
        self._reqs = _Requests()
        self._lock = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._seq = itertools.count(1)
        self._err: StreamEnded | None = None
        self._call = method(self._reqs, metadata=metadata)
        self._reader = threading.Thread(target=self._read, name="sluice-publish", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        err = StreamEnded("closed", "the publish stream was closed")
        try:
            for c in self._call:
                with self._lock:
                    fut = self._pending.pop(c.seq, None)
                if fut is None:
                    continue
                if c.HasField("error"):
                    fut.set_exception(SluiceError(c.error.code, c.error.message))
                    continue
                fut.set_result([
                    SendResult(r.message_id, r.sequence_number,
                               SluiceError(r.error.code, r.error.message) if r.HasField("error") else None)
                    for r in c.results])
        except grpc.RpcError as e:
            err = _ended(e)
        with self._lock:
            self._err = err
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(SluiceError(err.code, "no confirm came (the send may or may not be stored): " + err.message))

    def publish_async(self, queue: str, *messages: str | Mapping[str, Any] | pb.Envelope) -> concurrent.futures.Future:
        """Sends 1..10 messages to ``queue`` as one batch and returns a future
        of their :class:`sluice.SendResult` list, set once the send is
        durable. A message is a body, a dict of :func:`sluice.client.envelope`'s
        arguments, or a ``pb.Envelope``. The future's exception is a
        :class:`SluiceError` when the whole send was refused (``queue_full``,
        ``queue_not_found``, ...) or the stream ended first."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        req = pb.PublishRequest(queue=queue, messages=[_pb_envelope(m) for m in messages])
        with self._lock:
            if self._err is not None:
                fut.set_exception(self._err)
                return fut
            req.seq = next(self._seq)
            self._pending[req.seq] = fut
            self._reqs.put(req)
        return fut

    def publish(self, queue: str, *messages: str | Mapping[str, Any] | pb.Envelope,
                timeout: float | None = None) -> list[SendResult]:
        """:meth:`publish_async` and wait for the confirm."""
        return self.publish_async(queue, *messages).result(timeout)

    def close(self, timeout: float | None = 30.0) -> None:
        """Ends the stream once every send made is confirmed."""
        self._reqs.close()
        self._reader.join(timeout)
        if self._reader.is_alive():
            self._call.cancel()


class Consumer:
    """A Consume stream on one queue (made by :meth:`StreamClient.consume`).

    :meth:`receive` takes the next delivered message; many threads may call
    it at once. The settlements (:meth:`ack`, :meth:`nack`, ...) are
    answered once durable; :meth:`settle` sends several in one frame. The
    stream holds a message, using one of its credit, from its delivery until
    it is settled here or through another API. :meth:`close` ends the
    stream: the broker hands back at once, as failed attempts ("consumer
    disconnected"), what it still holds.
    """

    def __init__(self, method, metadata, queue: str, op: pb.Open, timeout: float):
        self.queue = queue
        self._reqs = _Requests()
        self._reqs.put(pb.ConsumeRequest(open=op))
        self._deliveries: queue_mod.SimpleQueue = queue_mod.SimpleQueue()
        self._lock = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future] = {}
        self._seq = itertools.count(1)
        self._err: StreamEnded | None = None
        self._opened = threading.Event()
        self._answered = threading.Event()  # opened, or ended first
        self._done = threading.Event()
        self.stream_id = ""
        self.lease_seconds = 0
        self.max_hold_seconds = 0
        self._call = method(self._reqs, metadata=metadata)
        self._reader = threading.Thread(target=self._read, name="sluice-consume", daemon=True)
        self._reader.start()
        if not self._answered.wait(timeout):
            self._call.cancel()
            self._done.wait(5)
            raise StreamEnded("timeout", f"the broker did not answer the open of a stream on {queue} within {timeout}s")
        if not self._opened.is_set():
            raise self._err

    def _read(self) -> None:
        err = StreamEnded("closed", "the stream ended")
        try:
            for r in self._call:
                kind = r.WhichOneof("kind")
                if kind == "opened":
                    self.stream_id = r.opened.stream_id
                    self.lease_seconds = r.opened.lease_seconds
                    self.max_hold_seconds = r.opened.max_hold_seconds
                    self._opened.set()
                    self._answered.set()
                elif kind == "deliveries":
                    for m in r.deliveries.messages:
                        self._deliveries.put(m)
                elif kind == "settled":
                    with self._lock:
                        fut = self._pending.pop(r.settled.seq, None)
                    if fut is not None:
                        fut.set_result([SluiceError(x.error.code, x.error.message) if x.HasField("error") else None
                                        for x in r.settled.results])
        except grpc.RpcError as e:
            err = _ended(e)
        with self._lock:
            self._err = err
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            fut.set_exception(err)
        self._deliveries.put(_END)
        self._done.set()
        self._answered.set()

    @property
    def err(self) -> StreamEnded | None:
        """Why the stream ended (None while it lives)."""
        return self._err

    def live(self) -> bool:
        """Whether the stream has not ended."""
        return not self._done.is_set()

    def wait_ended(self, timeout: float | None = None) -> bool:
        """Waits until the stream ends; whether it has."""
        return self._done.wait(timeout)

    def receive(self, timeout: float | None = None) -> pb.Message | None:
        """The next delivered message (``pb.Message``; :func:`message_from_pb`
        converts it), waiting up to ``timeout`` seconds (None: until one
        comes). None after the timeout, or when :meth:`wake` woke the
        caller. Raises :class:`StreamEnded` once the stream has ended and
        every message it delivered was taken."""
        try:
            m = self._deliveries.get(timeout=timeout)
        except queue_mod.Empty:
            return None
        if m is _END:
            self._deliveries.put(_END)  # for the other receivers
            raise self._err
        if m is _WAKE:
            return None
        return m

    def wake(self, n: int = 1) -> None:
        """Makes ``n`` waiting (or later) :meth:`receive` calls answer None."""
        for _ in range(n):
            self._deliveries.put(_WAKE)

    def take_delivered(self) -> list[pb.Message]:
        """The messages delivered that no :meth:`receive` took, without
        waiting (to release them)."""
        out, keep = [], []
        while True:
            try:
                m = self._deliveries.get_nowait()
            except queue_mod.Empty:
                break
            if m is _END or m is _WAKE:
                keep.append(m)
            else:
                out.append(m)
        for m in keep:
            self._deliveries.put(m)
        return out

    def settle(self, settlements: Iterable[pb.Settlement], timeout: float | None = 30.0) -> list[SluiceError | None]:
        """Sends settlements in one frame and answers, once they are durable,
        one error (or None) per settlement: ``invalid_parameter`` for a
        receipt this stream does not hold (settled already, another
        stream's, its lease ended), ... Raises :class:`StreamEnded` when the
        stream ended before the answer."""
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._lock:
            if self._err is not None:
                raise self._err
            seq = next(self._seq)
            self._pending[seq] = fut
            self._reqs.put(pb.ConsumeRequest(settle=pb.Settle(seq=seq, settlements=list(settlements))))
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            with self._lock:
                self._pending.pop(seq, None)
            raise StreamEnded("timeout", f"no answer to a settlement within {timeout}s") from None

    def _one(self, s: pb.Settlement, timeout: float | None) -> None:
        err = self.settle([s], timeout)[0]
        if err is not None:
            raise err

    def ack(self, receipt: str, timeout: float | None = 30.0) -> None:
        """Deletes the message: done."""
        self._one(pb.Settlement(receipt=receipt, ack=pb.Ack()), timeout)

    def nack(self, receipt: str, reason: str = "", delay_seconds: int | None = None,
             timeout: float | None = 30.0) -> None:
        """Hands the message back as a failed attempt with ``reason``, visible
        after ``delay_seconds`` (None: the queue's RetryPolicy backoff)."""
        n = pb.Nack(reason=reason)
        if delay_seconds is not None:
            n.delay_seconds = delay_seconds
        self._one(pb.Settlement(receipt=receipt, nack=n), timeout)

    def extend(self, receipt: str, seconds: int, timeout: float | None = 30.0) -> None:
        """Sets the lease to end ``seconds`` from now; the stream keeps it."""
        self._one(pb.Settlement(receipt=receipt, extend=pb.Extend(seconds=seconds)), timeout)

    def snooze(self, receipt: str, seconds: int, timeout: float | None = 30.0) -> None:
        """Hands the message back for ``seconds``; the attempt does not count."""
        self._one(pb.Settlement(receipt=receipt, snooze=pb.Snooze(seconds=seconds)), timeout)

    def release(self, receipt: str, timeout: float | None = 30.0) -> None:
        """Hands the message back at once; the attempt does not count."""
        self._one(pb.Settlement(receipt=receipt, release=pb.Release()), timeout)

    def dead_letter(self, receipt: str, reason: str = "", timeout: float | None = 30.0) -> None:
        """Moves the message to the queue's dead-letter queue now."""
        self._one(pb.Settlement(receipt=receipt, dead_letter=pb.DeadLetter(reason=reason)), timeout)

    def set_credit(self, credit: int) -> None:
        """Sets the stream's credit (0..10000; 0 pauses deliveries)."""
        with self._lock:
            if self._err is None:
                self._reqs.put(pb.ConsumeRequest(credit=pb.Credit(credit=credit)))

    def close(self, timeout: float | None = 10.0) -> None:
        """Ends the stream (its sending side, then waits for the broker's
        end, cancelling it after ``timeout``): the broker hands back what it
        still holds."""
        self._reqs.close()
        if not self._done.wait(timeout):
            self._call.cancel()
            self._done.wait(5)

    def cancel(self) -> None:
        """Cancels the stream at once."""
        self._call.cancel()
