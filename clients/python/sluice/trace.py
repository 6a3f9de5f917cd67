"""W3C trace context (``traceparent``) propagation, without a tracing library.

A message carries the trace context it was sent with (the envelope's
``traceContext``, stored as the ``traceparent`` message attribute where
OpenTelemetry's SQS instrumentations put it). The worker runs each handler
with its message's trace context as the current one (:func:`current`), and
:meth:`sluice.Client.send` and :meth:`sluice.stream.Publisher.publish` give a
message sent without an explicit ``trace_context`` a child of the current
one: the same trace id, a new parent id. So a chain of queues stays one
trace.

With OpenTelemetry, take the context from its propagator instead and pass it
as ``trace_context`` (``TraceContextTextMapPropagator().inject(carrier)``
gives ``carrier["traceparent"]``).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import secrets

__all__ = ["current", "use", "child", "new", "valid"]

_current: contextvars.ContextVar[str] = contextvars.ContextVar("sluice_traceparent", default="")

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def valid(traceparent: str) -> bool:
    """Reports whether ``traceparent`` is a W3C traceparent of version 00
    (``00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>``, ids not all
    zero)."""
    m = _TRACEPARENT.match(traceparent or "")
    if not m or m.group(1) == "ff":
        return False
    return m.group(2) != "0" * 32 and m.group(3) != "0" * 16


def current() -> str:
    """The current trace context: inside a handler, its message's
    traceparent ("" when none)."""
    return _current.get()


@contextlib.contextmanager
def use(traceparent: str):
    """Makes ``traceparent`` the current trace context within the ``with``
    block (the worker does it around each handler)."""
    token = _current.set(traceparent or "")
    try:
        yield
    finally:
        _current.reset(token)


def new(sampled: bool = True) -> str:
    """A new traceparent: a new trace id and parent id."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-{'01' if sampled else '00'}"


def child(traceparent: str) -> str:
    """A traceparent in the same trace as ``traceparent`` with a new parent
    id, keeping its flags; "" when ``traceparent`` is not valid."""
    if not valid(traceparent):
        return ""
    _, trace_id, _, flags = traceparent.split("-")
    return f"00-{trace_id}-{secrets.token_hex(8)}-{flags}"
