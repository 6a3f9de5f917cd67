"""Errors of the Sluice client: one class for what the broker answers.

Every error the broker answers carries the native API's code (``docs/api.md``,
Errors): ``queue_not_found``, ``invalid_parameter``, ``queue_full``,
``message_not_in_flight``, ``unavailable``, ... Programs match on ``code``;
``message`` is for a person.
"""

from __future__ import annotations

__all__ = [
    "SluiceError",
    "StreamEnded",
    "QUEUE_NOT_FOUND",
    "QUEUE_FULL",
    "INVALID_PARAMETER",
    "INVALID_RECEIPT",
    "MESSAGE_NOT_IN_FLIGHT",
    "CONFLICT",
    "UNAVAILABLE",
    "THROTTLED",
]

QUEUE_NOT_FOUND = "queue_not_found"
QUEUE_FULL = "queue_full"
INVALID_PARAMETER = "invalid_parameter"
INVALID_RECEIPT = "invalid_receipt"
MESSAGE_NOT_IN_FLIGHT = "message_not_in_flight"
CONFLICT = "conflict"
UNAVAILABLE = "unavailable"
THROTTLED = "throttled"


class SluiceError(Exception):
    """An error the broker answered, or a request that could not be made.

    Attributes:
        code: the native API's error code (``"queue_not_found"``, ...), or
            ``"connection"`` when no answer came (the broker is unreachable,
            the connection broke).
        message: what was wrong, for a person.
        status: the HTTP status (0 on a stream, or without an answer).
        retry_after: the seconds of a ``Retry-After`` header, or None.
    """

    def __init__(self, code: str, message: str, status: int = 0, retry_after: float | None = None):
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after


class StreamEnded(SluiceError):
    """A stream that ended: closed by the client, or ended by the broker with
    a gRPC status. ``code`` is the status's ``google.rpc.ErrorInfo`` reason
    when the broker gave one (``queue_not_found``, ``unavailable``, ...), else
    the lower-case gRPC status name (``"unavailable"`` for a lost
    connection); ``grpc_code`` is the ``grpc.StatusCode`` (None after a close
    by the client)."""

    def __init__(self, code: str, message: str, grpc_code=None):
        super().__init__(code, message)
        self.grpc_code = grpc_code
