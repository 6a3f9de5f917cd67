"""The client of Sluice's native JSON API (``docs/api.md``), standard library only.

A :class:`Client` talks to one broker and is safe to share between threads:
each call is one HTTP request (``http.client``, a connection per request).
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import json
import random
import socket
import time
import urllib.parse
from typing import Any, Iterable, Mapping

from . import trace
from .errors import SluiceError

__all__ = [
    "Attribute",
    "Client",
    "Message",
    "String",
    "Number",
    "Binary",
    "SendResult",
    "IDEMPOTENCY_KEY",
]

IDEMPOTENCY_KEY = "IdempotencyKey"
"""The String message attribute that carries a producer-given idempotency key
(:func:`sluice.idempotency.key`; the Go worker's ``idempotency.Key`` reads the
same one)."""

#: The most one Retry-After may make a retry wait, in seconds.
_MAX_RETRY_AFTER = 60.0


@dataclasses.dataclass(frozen=True)
class Attribute:
    """A message attribute: ``type`` is ``"String"``, ``"Number"`` or
    ``"Binary"`` (optionally with a ``.label``), ``value`` a str (String,
    Number) or bytes (Binary)."""

    type: str
    value: str | bytes


def String(value: str) -> Attribute:
    """A String attribute."""
    return Attribute("String", value)


def Number(value: int | float | str) -> Attribute:
    """A Number attribute (a decimal number)."""
    return Attribute("Number", str(value))


def Binary(value: bytes) -> Attribute:
    """A Binary attribute."""
    return Attribute("Binary", bytes(value))


def _attribute(v: Any) -> Attribute:
    if isinstance(v, Attribute):
        return v
    if isinstance(v, bool):
        raise TypeError("a message attribute is a str, int, float, bytes or Attribute, not a bool")
    if isinstance(v, str):
        return String(v)
    if isinstance(v, (int, float)):
        return Number(v)
    if isinstance(v, (bytes, bytearray)):
        return Binary(v)
    raise TypeError(f"a message attribute is a str, int, float, bytes or Attribute, not {type(v).__name__}")


def _wire_attributes(attrs: Mapping[str, Any] | None) -> dict | None:
    if not attrs:
        return None
    out = {}
    for name, v in attrs.items():
        a = _attribute(v)
        if isinstance(a.value, (bytes, bytearray)):
            out[name] = {"type": a.type, "value": base64.b64encode(a.value).decode()}
        else:
            out[name] = {"type": a.type, "value": a.value}
    return out


@dataclasses.dataclass
class Message:
    """A delivered message with its lease's receipt, as the native API's
    receive and the stream API's deliveries give it.

    ``body`` is the text sent; :meth:`json` decodes it. ``attempts`` counts
    its attempts, this delivery included (a snooze or release gives one
    back); ``receive_count`` every delivery; ``max_attempts`` its attempt
    limit (0: none). ``sent_at`` is seconds since the Unix epoch.
    ``failure_reason`` is the reason of its latest failure (a nack's,
    ``"lease expired"``, ``"consumer disconnected"``, ...).
    """

    id: str
    body: str
    receipt: str = ""
    queue: str = ""
    attributes: dict[str, Attribute] = dataclasses.field(default_factory=dict)
    priority: int = 0
    attempts: int = 0
    receive_count: int = 0
    max_attempts: int = 0
    correlation_id: str = ""
    trace_context: str = ""
    group_id: str = ""
    dedup_id: str = ""
    sequence_number: str = ""
    failure_reason: str = ""
    ttl_seconds: int = 0
    sent_at: float = 0.0
    dead_letter_source: str = ""

    def json(self) -> Any:
        """The body decoded as JSON (``json.loads``)."""
        return json.loads(self.body)

    def attribute(self, name: str, default: str | bytes | None = None) -> str | bytes | None:
        """The value of attribute ``name``, or ``default``."""
        a = self.attributes.get(name)
        return default if a is None else a.value


def _parse_time(s: str | None) -> float:
    if not s:
        return 0.0
    from datetime import datetime

    # RFC 3339 in UTC, with up to 9 fractional digits: Python takes 6.
    s = s.replace("Z", "+00:00")
    if "." in s:
        head, rest = s.split(".", 1)
        frac = "".join(ch for ch in rest if ch.isdigit())
        tz = rest[len(frac):]
        s = f"{head}.{frac[:6]}{tz}"
    return datetime.fromisoformat(s).timestamp()


def _message_from_wire(queue: str, m: dict) -> Message:
    attrs = {}
    for name, a in (m.get("attributes") or {}).items():
        value = a.get("value", "")
        if a.get("type", "").startswith("Binary"):
            value = base64.b64decode(value)
        attrs[name] = Attribute(a.get("type", ""), value)
    return Message(
        id=m.get("id", ""),
        body=m.get("body", ""),
        receipt=m.get("receipt", ""),
        queue=queue,
        attributes=attrs,
        priority=m.get("priority", 0),
        attempts=m.get("attempts", 0),
        receive_count=m.get("receiveCount", 0),
        max_attempts=m.get("maxAttempts", 0) or 0,
        correlation_id=m.get("correlationId", ""),
        trace_context=m.get("traceContext", ""),
        group_id=m.get("groupId", ""),
        dedup_id=m.get("dedupId", ""),
        sequence_number=m.get("sequenceNumber", ""),
        failure_reason=m.get("failureReason", ""),
        ttl_seconds=m.get("ttlSeconds", 0) or 0,
        sent_at=_parse_time(m.get("createdAt")),
        dead_letter_source=m.get("deadLetterSource", ""),
    )


@dataclasses.dataclass(frozen=True)
class SendResult:
    """One message's outcome in a batch send: its ``message_id`` (and a FIFO
    message's ``sequence_number``), or the ``error`` that refused it."""

    message_id: str = ""
    sequence_number: str = ""
    error: SluiceError | None = None


def envelope(
    body: str,
    *,
    attributes: Mapping[str, Any] | None = None,
    priority: int | None = None,
    max_attempts: int | None = None,
    ttl_seconds: int | None = None,
    correlation_id: str | None = None,
    trace_context: str | None = None,
    delay_seconds: int | None = None,
    group_id: str | None = None,
    dedup_id: str | None = None,
    idempotency_key: str | None = None,
) -> dict:
    """The native API's envelope of a message (``docs/api.md``, Send), as a
    dict. ``trace_context`` None takes a child of the current trace context
    (:func:`sluice.trace.current`), "" sends none. ``idempotency_key`` sets
    the ``IdempotencyKey`` String attribute."""
    if not isinstance(body, str):
        raise TypeError("a message body is a str (use json.dumps for a payload)")
    attrs = dict(attributes or {})
    if idempotency_key is not None:
        attrs[IDEMPOTENCY_KEY] = String(idempotency_key)
    if trace_context is None:
        trace_context = trace.child(trace.current())
    e: dict[str, Any] = {"body": body}
    wire = _wire_attributes(attrs)
    if wire:
        e["attributes"] = wire
    for key, v in (
        ("priority", priority),
        ("maxAttempts", max_attempts),
        ("ttlSeconds", ttl_seconds),
        ("correlationId", correlation_id),
        ("traceContext", trace_context or None),
        ("delaySeconds", delay_seconds),
        ("groupId", group_id),
        ("dedupId", dedup_id),
    ):
        if v is not None:
            e[key] = v
    return e


class Client:
    """A client of one broker's native API.

    ``base_url`` is ``http://host:port`` (or ``https://``). ``token`` is an
    access key ``"ACCESS_KEY_ID:SECRET"`` on a broker with ``--keys``.

    Retries: a 429 (``queue_full``, ``throttled``, ``over_limit``), Sluice's
    own 503 (``unavailable``, ``store_full``: its JSON error body) and a
    connection that could not be made mean the broker did nothing, so every
    request is retried then (``Retry-After`` honoured, else a full-jitter
    backoff from ``backoff_base`` to ``backoff_cap`` seconds), up to
    ``retries`` times. A failure that may come after the work was done (a
    broken connection, a 500, a proxy's 5xx) is retried only for requests
    that are safe to repeat: reads, creates, receive, ack, extend, and a send
    whose messages all carry a ``dedup_id``. Nack, snooze, release,
    dead-letter, deletes and purges are not: the error is raised.
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:9324",
        *,
        token: str | None = None,
        timeout: float = 30.0,
        retries: int = 3,
        backoff_base: float = 0.1,
        backoff_cap: float = 5.0,
        user_agent: str = "sluice-python",
    ):
        u = urllib.parse.urlsplit(base_url if "://" in base_url else "http://" + base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url {base_url!r}: want http://host:port or https://host:port")
        self.base_url = f"{u.scheme}://{u.netloc}"
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.user_agent = user_agent
        self._scheme = u.scheme
        self._host = u.hostname
        self._port = u.port or (443 if u.scheme == "https" else 80)
        self._rand = random.Random()

    # -- transport ---------------------------------------------------------

    def _once(self, method: str, path: str, body: bytes | None, timeout: float):
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout)
        headers = {"User-Agent": self.user_agent, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, resp.getheader("Retry-After"), data
        finally:
            conn.close()

    def _request(self, method: str, path: str, payload: Any = None, *, query: Mapping[str, Any] | None = None,
                 safe: bool = True, timeout: float | None = None) -> Any:
        """One call with the retries of the class comment; the decoded JSON
        answer (None for 204)."""
        if query:
            q = {k: v for k, v in query.items() if v is not None}
            if q:
                path += "?" + urllib.parse.urlencode(q)
        body = None if payload is None else json.dumps(payload).encode()
        timeout = self.timeout if timeout is None else timeout
        attempt = 0
        while True:
            retry_after = None
            try:
                status, retry_after_h, data = self._once(method, path, body, timeout)
            except ConnectionRefusedError as e:
                err = SluiceError("connection", f"{self.base_url}: {e}")
                again = True  # nothing was sent
            except (OSError, http.client.HTTPException, socket.timeout) as e:
                err = SluiceError("connection", f"{method} {self.base_url}{path}: {e}")
                again = safe
            else:
                if status < 300:
                    return json.loads(data) if data else None
                code, message = "http_%d" % status, data[:200].decode(errors="replace")
                sluice_body = False
                try:
                    doc = json.loads(data)
                    code, message, sluice_body = doc["code"], doc.get("message", ""), True
                except (ValueError, KeyError, TypeError):
                    pass
                if retry_after_h:
                    try:
                        retry_after = min(float(retry_after_h), _MAX_RETRY_AFTER)
                    except ValueError:
                        pass
                err = SluiceError(code, message, status, retry_after)
                if status == 429 or (status == 503 and sluice_body):
                    again = True
                elif status >= 500:
                    again = safe
                else:
                    again = False
            if not again or attempt >= self.retries:
                raise err
            attempt += 1
            wait = retry_after
            if wait is None:
                wait = self._rand.uniform(0, min(self.backoff_cap, self.backoff_base * 2 ** (attempt - 1)))
            time.sleep(wait)

    @staticmethod
    def _q(queue: str) -> str:
        return urllib.parse.quote(queue, safe="")

    # -- queues ------------------------------------------------------------

    def create_queue(self, name: str, attributes: Mapping[str, str] | None = None,
                     tags: Mapping[str, str] | None = None) -> dict:
        """Creates queue ``name`` (or answers it, when it exists with these
        attributes). ``attributes`` are SQS attribute strings and the Sluice
        ones (``RedrivePolicy``, ``RetryPolicy``, ``MaxDepth``, ...)."""
        req: dict[str, Any] = {"name": name}
        if attributes:
            req["attributes"] = dict(attributes)
        if tags:
            req["tags"] = dict(tags)
        return self._request("POST", "/v1/queues", req)

    def get_queue(self, queue: str) -> dict:
        """The queue: name, ARN, attributes, tags and stats."""
        return self._request("GET", f"/v1/queues/{self._q(queue)}")

    def update_queue(self, queue: str, attributes: Mapping[str, str]) -> dict:
        """Changes the queue's attributes."""
        return self._request("PATCH", f"/v1/queues/{self._q(queue)}", {"attributes": dict(attributes)})

    def delete_queue(self, queue: str) -> None:
        """Deletes the queue and its messages."""
        self._request("DELETE", f"/v1/queues/{self._q(queue)}", safe=False)

    def purge(self, queue: str) -> None:
        """Deletes every message of the queue."""
        self._request("POST", f"/v1/queues/{self._q(queue)}/purge", safe=False)

    def stats(self, queue: str) -> dict:
        """The queue's counts: ``visible``, ``inFlight``, ``delayed``,
        ``depth``, ``deadLetters`` (None without a dead-letter queue), ..."""
        return self._request("GET", f"/v1/queues/{self._q(queue)}/stats")

    def consumers(self, queue: str) -> list[dict]:
        """The consumer streams open on the queue (``docs/api.md``, Consumers)."""
        return self._request("GET", f"/v1/queues/{self._q(queue)}/consumers")["consumers"]

    # -- messages ----------------------------------------------------------

    def send(self, queue: str, body: str, **fields: Any) -> str:
        """Sends one message and answers its id once it is durable. The
        keyword fields are :func:`envelope`'s: ``attributes``, ``priority``,
        ``max_attempts``, ``ttl_seconds``, ``correlation_id``,
        ``trace_context``, ``delay_seconds``, ``group_id``, ``dedup_id``,
        ``idempotency_key``."""
        e = envelope(body, **fields)
        doc = self._request("POST", f"/v1/queues/{self._q(queue)}/messages", e, safe="dedupId" in e)
        return doc["id"]

    def send_batch(self, queue: str, messages: Iterable[str | Mapping[str, Any]]) -> list[SendResult]:
        """Sends up to 10 messages in one request (one sync). Each is a body,
        or a dict of :func:`envelope`'s arguments (``{"body": ..., "priority":
        5}``). Answers one :class:`SendResult` per message, in order."""
        envs = [envelope(m) if isinstance(m, str) else envelope(**m) for m in messages]
        entries = [dict(e, id=str(i)) for i, e in enumerate(envs)]
        doc = self._request("POST", f"/v1/queues/{self._q(queue)}/messages/batch", {"messages": entries},
                            safe=all("dedupId" in e for e in envs))
        out = []
        for r in doc["results"]:
            if r.get("ok"):
                out.append(SendResult(r.get("messageId", ""), r.get("sequenceNumber", "")))
            else:
                e = r.get("error") or {}
                out.append(SendResult(error=SluiceError(e.get("code", ""), e.get("message", ""))))
        return out

    def receive(self, queue: str, max: int = 1, wait_seconds: int | None = None,
                visibility_seconds: int | None = None) -> list[Message]:
        """Leases up to ``max`` (1..10) messages, waiting up to
        ``wait_seconds`` (0..20; None: the queue's default) for a first one,
        each for ``visibility_seconds`` (None: the queue's
        VisibilityTimeout)."""
        req: dict[str, Any] = {"max": max}
        if wait_seconds is not None:
            req["waitSeconds"] = wait_seconds
        if visibility_seconds is not None:
            req["visibilitySeconds"] = visibility_seconds
        doc = self._request("POST", f"/v1/queues/{self._q(queue)}/receive", req,
                            timeout=self.timeout + (wait_seconds or 20))
        return [_message_from_wire(queue, m) for m in doc.get("messages") or []]

    def browse(self, queue: str, *, limit: int | None = None, cursor: str | None = None,
               order: str | None = None, attribute: str | None = None, value: str | None = None,
               reason: str | None = None) -> tuple[list[Message], str]:
        """A page of the queue's messages without receiving them, and the
        cursor of the next page ("" at the end)."""
        doc = self._request("GET", f"/v1/queues/{self._q(queue)}/messages", query={
            "limit": limit, "cursor": cursor, "order": order, "attribute": attribute, "value": value,
            "reason": reason})
        return [_message_from_wire(queue, m) for m in doc.get("messages") or []], doc.get("next", "") or ""

    def dead_letters(self, queue: str, *, limit: int | None = None, cursor: str | None = None,
                     reason: str | None = None) -> tuple[list[Message], str]:
        """A page of the queue's dead letters (the messages its RedrivePolicy
        moved to its dead-letter queue), each with its ``failure_reason``,
        ``attempts`` and ``dead_letter_source``."""
        doc = self._request("GET", f"/v1/queues/{self._q(queue)}/dead-letters", query={
            "limit": limit, "cursor": cursor, "reason": reason})
        return [_message_from_wire(queue, m) for m in doc.get("messages") or []], doc.get("next", "") or ""

    def message_status(self, queue: str, message_id: str) -> dict | None:
        """What became of a message, by its id (``docs/api.md``, Job status):
        a dict with ``state`` (``delayed``, ``ready``, ``inFlight``,
        ``backingOff``, ``deadLettered``, ``completed``, ``expired``,
        ``replayed``), ``attempts``, and as they apply ``visibleAt``,
        ``leaseEndsAt``, ``deadLetterQueue``, ``reason``, ``failures`` (the
        last 10, oldest first, each ``{"reason", "at"}``), ``failureCount``,
        ``completedAt``, ``result``, ``expiredAt``, ``replayedAs``. None when
        the queue knows no such message (a message that left it is kept only
        while its ``CompletedRetentionSeconds`` lasts)."""
        try:
            return self._request("GET", f"/v1/queues/{self._q(queue)}/messages/{urllib.parse.quote(message_id, safe='')}")
        except SluiceError as e:
            if e.code == "message_not_found":
                return None
            raise

    # -- consumer controls -------------------------------------------------

    def _control(self, queue: str, action: str, receipt: str, safe: bool, **fields: Any) -> None:
        req = {"receipt": receipt}
        req.update({k: v for k, v in fields.items() if v is not None})
        self._request("POST", f"/v1/queues/{self._q(queue)}/{action}", req, safe=safe)

    def ack(self, queue: str, receipt: str, result: str | None = None) -> None:
        """Deletes the message: the work is done (an ack of a stale receipt
        succeeds without effect). ``result`` (at most 64 KiB) is kept with
        the message's ``completed`` status while its queue keeps records
        (``CompletedRetentionSeconds``)."""
        self._control(queue, "ack", receipt, True, result=result)

    def nack(self, queue: str, receipt: str, reason: str = "", delay_seconds: int | None = None) -> None:
        """Hands the message back as a failed attempt with ``reason``; after
        ``delay_seconds`` (0..43200), or the queue's RetryPolicy backoff when
        None. Past its last attempt it moves to the dead-letter queue."""
        self._control(queue, "nack", receipt, False, reason=reason or None, delaySeconds=delay_seconds)

    def snooze(self, queue: str, receipt: str, delay_seconds: int) -> None:
        """Hands the message back, visible after ``delay_seconds``; the attempt
        does not count."""
        self._control(queue, "snooze", receipt, False, delaySeconds=delay_seconds)

    def release(self, queue: str, receipt: str) -> None:
        """Hands the message back at once; the attempt does not count."""
        self._control(queue, "release", receipt, False)

    def dead_letter(self, queue: str, receipt: str, reason: str = "") -> None:
        """Moves the message to the queue's dead-letter queue now, whatever its
        attempts (``conflict`` on a queue without a RedrivePolicy)."""
        self._control(queue, "dead-letter", receipt, False, reason=reason or None)

    def extend(self, queue: str, receipt: str, visibility_seconds: int) -> None:
        """Sets the lease to end ``visibility_seconds`` (1..43200) from now."""
        self._control(queue, "extend", receipt, True, visibilitySeconds=visibility_seconds)
