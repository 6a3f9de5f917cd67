"""Sluice's Python client and worker.

- :class:`Client`: the native JSON API (``docs/api.md``): queues, send,
  receive, the consumer controls (ack, nack with a reason, snooze, release,
  dead-letter now, extend), browse and dead letters. Standard library only.
- :mod:`sluice.stream`: the stream API (``docs/streams.md``) over gRPC:
  pipelined sends confirmed once durable, consumer streams with credit.
- :class:`Worker`: a pool that runs a handler over a queue's messages over a
  consumer stream, with a concurrency limit and prefetch, handler outcomes,
  and a graceful stop on SIGTERM.
- :class:`sluice.aio.AsyncWorker`: the same pool for ``async def`` handlers.
- :mod:`sluice.idempotency`: a message's effect once per key (exactly once
  for writes to PostgreSQL, in the handler's own transaction).
- :mod:`sluice.trace`: W3C trace context from producer to handler.

The stream API and the worker need ``grpcio`` and ``protobuf`` (Debian 12's
``python3-grpcio`` and ``python3-protobuf``); they are imported on first use,
so the native client works without them.
"""

from .client import IDEMPOTENCY_KEY, Attribute, Binary, Client, Message, Number, SendResult, String, envelope
from .errors import SluiceError, StreamEnded

__all__ = [
    "Attribute", "Binary", "Client", "Message", "Number", "SendResult", "String", "envelope",
    "SluiceError", "StreamEnded", "IDEMPOTENCY_KEY",
    "Worker", "RetryAfter", "Snooze", "DeadLetterNow", "json_handler", "StreamClient",
]

__version__ = "0.1.0"

_LAZY = {
    "Worker": "worker", "RetryAfter": "worker", "Snooze": "worker", "DeadLetterNow": "worker",
    "json_handler": "worker", "StreamClient": "stream",
}


def __getattr__(name):
    # The names that need grpc come from their modules on first use.
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'sluice' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f".{mod}", __name__), name)
