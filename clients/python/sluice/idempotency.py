"""Run a message's effect once per key, although a queue delivers at least once.

A key names the work a message asks for (:func:`key`): the producer-given
``IdempotencyKey`` String attribute, else the message id. A producer-given key
is better: a retried send or a replay from the dead-letter queue makes a new
message with a new id and the same key.

**Exactly once, for writes to your PostgreSQL database**: :meth:`PgStore.in_tx`
begins a transaction, records the key (``INSERT ... ON CONFLICT DO NOTHING``),
runs your function with that transaction's connection and commits: the key and
your writes commit together or not at all. A redelivery finds the key and
answers ``False`` (ack the message). The table is the Go ``pgstore``'s
(``sluice_idempotency_keys``: ``key text COLLATE "C" PRIMARY KEY, recorded_at
timestamptz``), so Go and Python workers can share one.

**Effects outside the database** cannot be exactly once; choose with
:func:`do`: :data:`AT_MOST_ONCE` records the key first (a crash after the
record skips the effect forever; raise :class:`Uncertain` when the effect may
have happened, to keep the key), :data:`AT_LEAST_ONCE` runs the effect first (a
crash before the record repeats it).
"""

from __future__ import annotations

import enum
import functools
import re
import threading
from typing import Any, Callable

from .client import IDEMPOTENCY_KEY, Message

__all__ = [
    "key",
    "Mode",
    "AT_MOST_ONCE",
    "AT_LEAST_ONCE",
    "Uncertain",
    "do",
    "middleware",
    "MemoryStore",
    "PgStore",
    "DEFAULT_TABLE",
]

DEFAULT_TABLE = "sluice_idempotency_keys"


def key(m: Message) -> str:
    """The idempotency key of ``m``: its ``IdempotencyKey`` String attribute,
    else its message id."""
    a = m.attributes.get(IDEMPOTENCY_KEY)
    if a is not None and isinstance(a.value, str) and a.value:
        return a.value
    return m.id


class Mode(enum.Enum):
    """The order of the key's record and the effect."""

    AT_MOST_ONCE = 1
    """Record the key, then run the effect: a crash between them skips it."""
    AT_LEAST_ONCE = 2
    """Run the effect, then record the key: a crash between them repeats it."""


AT_MOST_ONCE = Mode.AT_MOST_ONCE
AT_LEAST_ONCE = Mode.AT_LEAST_ONCE


class Uncertain(Exception):
    """Raised by an AT_MOST_ONCE effect that failed after it may have happened
    (a timeout after the request left): the key stays recorded, and the
    effect is never tried again. ``__cause__`` is the failure."""


def do(store, k: str, mode: Mode, fn: Callable[[], Any]) -> bool:
    """Runs ``fn`` for key ``k`` at most once (AT_MOST_ONCE) or until it
    succeeds once (AT_LEAST_ONCE), as recorded in ``store``. Answers whether
    ``fn`` ran; False means the key was done already (ack the message).

    AT_MOST_ONCE: claims the key, then calls fn; an exception from fn forgets
    the claim (the effect did not happen: a retry runs it), unless it is an
    :class:`Uncertain`. AT_LEAST_ONCE: calls fn unless the key is recorded,
    and records it after fn returns. fn's exceptions propagate.
    """
    if not k:
        raise ValueError("idempotency: empty key")
    if mode is Mode.AT_MOST_ONCE:
        if not store.claim(k):
            return False
        try:
            fn()
        except Uncertain:
            raise
        except BaseException:
            store.forget(k)
            raise
        return True
    if mode is Mode.AT_LEAST_ONCE:
        if store.seen(k):
            return False
        fn()
        store.claim(k)
        return True
    raise ValueError("idempotency: choose a Mode: AT_MOST_ONCE (key first: a crash may skip the effect) "
                     "or AT_LEAST_ONCE (key after: a crash may repeat it)")


def middleware(store, mode: Mode) -> Callable[[Callable[[Message], Any]], Callable[[Message], Any]]:
    """A decorator that runs a handler through :func:`do`, keyed by
    :func:`key`: a message whose key is done is acked without calling it."""

    def wrap(handler):
        @functools.wraps(handler)
        def h(m: Message):
            do(store, key(m), mode, lambda: handler(m))

        return h

    return wrap


class MemoryStore:
    """Keys in memory, for tests: unbounded, lost with the process."""

    def __init__(self):
        self._keys: set[str] = set()
        self._lock = threading.Lock()

    def claim(self, k: str) -> bool:
        with self._lock:
            if k in self._keys:
                return False
            self._keys.add(k)
            return True

    def seen(self, k: str) -> bool:
        with self._lock:
            return k in self._keys

    def forget(self, k: str) -> None:
        with self._lock:
            self._keys.discard(k)


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class PgStore:
    """The PostgreSQL store (psycopg 3, Debian's ``python3-psycopg``).

    ``conninfo`` is a libpq connection string or URL. Each thread uses a
    connection of its own, opened on first use. The table (``table``,
    optionally in ``schema``) is created when missing, with the Go
    ``pgstore``'s layout.

    Two deliveries of one key at once: the second's insert waits on the
    key's unique index until the first transaction ends; it then finds the
    key (committed) or records it and runs (rolled back). Keep ``in_tx``'s
    function short: it holds the key's index entry until the commit.
    """

    def __init__(self, conninfo: str, *, table: str = DEFAULT_TABLE, schema: str | None = None):
        import psycopg  # Debian's python3-psycopg; only this store needs it

        if not _IDENT.match(table) or (schema is not None and not _IDENT.match(schema)):
            raise ValueError("table and schema: 1..63 letters, digits or underscores, not starting with a digit")
        self._psycopg = psycopg
        self.conninfo = conninfo
        self.table = f'"{schema}"."{table}"' if schema else f'"{table}"'
        index = f'"{table[:63 - len("_recorded_at")]}_recorded_at"'
        index_q = f'"{schema}".{index}' if schema else index
        self._local = threading.local()
        ddl = (f'CREATE TABLE IF NOT EXISTS {self.table} (key text COLLATE "C" PRIMARY KEY, '
               f'recorded_at timestamptz NOT NULL DEFAULT now())', f'CREATE INDEX IF NOT EXISTS {index} ON '
               f'{self.table} (recorded_at)')
        # The DDL runs only when the table or its index is missing (a store
        # stopped between the two statements made the table alone), as the
        # Go pgstore's New: CREATE INDEX IF NOT EXISTS locks the table
        # against writes before it finds the index, so it would wait for
        # every open transaction of the workers that already use it.
        # Concurrent creators may race on CREATE TABLE IF NOT EXISTS (its
        # check and create are not atomic): the loser tries once more.
        for attempt in range(2):
            try:
                with psycopg.connect(conninfo, autocommit=True) as conn:
                    if conn.execute("SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
                                    (self.table, index_q)).fetchone()[0]:
                        break
                    for stmt in ddl:
                        conn.execute(stmt)
                break
            except psycopg.errors.UniqueViolation:
                if attempt:
                    raise

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None or c.closed or c.broken:
            c = self._psycopg.connect(self.conninfo, autocommit=True)
            self._local.conn = c
        return c

    def in_tx(self, k: str, fn: Callable[[Any], Any]) -> bool:
        """Runs ``fn(conn)`` exactly once per key for its writes through
        ``conn`` (a psycopg connection inside the transaction): records ``k``
        and, when it was new, calls fn and commits. Answers whether fn ran;
        False means the key was done already (ack the message), and nothing
        was written. An exception from fn rolls back both (a retry runs fn
        again). fn must write only through ``conn``."""
        if not k:
            raise ValueError("idempotency: empty key")
        conn = self._conn()
        try:
            with conn.transaction():
                cur = conn.execute(f"INSERT INTO {self.table} (key) VALUES (%s) ON CONFLICT (key) DO NOTHING", (k,))
                if cur.rowcount != 1:
                    return False
                fn(conn)
            return True
        finally:
            if conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
                conn.rollback()

    def claim(self, k: str) -> bool:
        conn = self._conn()
        with conn.transaction():
            cur = conn.execute(f"INSERT INTO {self.table} (key) VALUES (%s) ON CONFLICT (key) DO NOTHING", (k,))
            return cur.rowcount == 1

    def seen(self, k: str) -> bool:
        conn = self._conn()
        with conn.transaction():
            return conn.execute(f"SELECT EXISTS (SELECT 1 FROM {self.table} WHERE key = %s)", (k,)).fetchone()[0]

    def forget(self, k: str) -> None:
        conn = self._conn()
        with conn.transaction():
            conn.execute(f"DELETE FROM {self.table} WHERE key = %s", (k,))

    def prune(self, older_than_seconds: float) -> int:
        """Deletes the keys recorded more than ``older_than_seconds`` ago (on
        the database's clock), 10,000 per transaction; answers how many. Keep
        keys longer than any copy of a message can live."""
        if older_than_seconds <= 0:
            raise ValueError("prune: give a positive age (longer than the queue's retention period)")
        conn, total = self._conn(), 0
        while True:
            with conn.transaction():
                n = conn.execute(
                    f"DELETE FROM {self.table} WHERE key IN (SELECT key FROM {self.table} "
                    f"WHERE recorded_at < now() - %s * interval '1 second' LIMIT 10000)",
                    (older_than_seconds,)).rowcount
            total += n
            if n < 10000:
                return total

    def close(self) -> None:
        """Closes this thread's connection."""
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None
