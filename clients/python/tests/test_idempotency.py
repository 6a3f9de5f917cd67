"""The idempotency helper: the modes' rules on the memory store, and the
PostgreSQL store's transaction (the key and the writes commit together)."""

import threading

import pytest

from sluice import Message, String
from sluice.idempotency import AT_LEAST_ONCE, AT_MOST_ONCE, MemoryStore, PgStore, Uncertain, do, key, middleware


def test_key():
    assert key(Message(id="m1", body="x")) == "m1"
    assert key(Message(id="m1", body="x", attributes={"IdempotencyKey": String("pay/7")})) == "pay/7"


def test_modes():
    s = MemoryStore()
    runs = []
    assert do(s, "a", AT_MOST_ONCE, lambda: runs.append("a"))
    assert not do(s, "a", AT_MOST_ONCE, lambda: runs.append("again"))
    with pytest.raises(ValueError):
        do(s, "b", AT_MOST_ONCE, lambda: (_ for _ in ()).throw(ValueError("not sent")))
    assert not s.seen("b")  # an error says the effect did not happen: forgotten
    with pytest.raises(Uncertain):
        do(s, "c", AT_MOST_ONCE, lambda: (_ for _ in ()).throw(Uncertain("timeout")))
    assert s.seen("c")  # may have happened: kept
    with pytest.raises(ValueError):
        do(s, "d", AT_LEAST_ONCE, lambda: (_ for _ in ()).throw(ValueError("failed")))
    assert not s.seen("d")
    assert do(s, "d", AT_LEAST_ONCE, lambda: runs.append("d")) and s.seen("d")
    assert runs == ["a", "d"]
    with pytest.raises(ValueError):
        do(s, "e", None, lambda: None)

    handled = []
    h = middleware(s, AT_LEAST_ONCE)(lambda m: handled.append(m.id))
    h(Message(id="m1", body=""))
    h(Message(id="m1", body=""))
    assert handled == ["m1"]


def test_pg_store_in_tx(pg):
    import psycopg

    store = PgStore(pg)
    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS paid (k text)")
        cols = conn.execute("SELECT column_name, data_type FROM information_schema.columns "
                            "WHERE table_name = 'sluice_idempotency_keys' ORDER BY ordinal_position").fetchall()
    # The Go pgstore's layout: Go and Python workers share the table.
    assert cols == [("key", "text"), ("recorded_at", "timestamp with time zone")]

    def pay(conn):
        conn.execute("INSERT INTO paid (k) VALUES ('x')")

    def fail(conn):
        pay(conn)
        raise RuntimeError("card declined")

    with pytest.raises(RuntimeError):
        store.in_tx("pay/x", fail)
    assert not store.seen("pay/x")  # rolled back: key and write both
    assert store.in_tx("pay/x", pay)
    assert not store.in_tx("pay/x", pay)

    # Two deliveries at once: the second waits for the first's commit, then
    # finds the key.
    entered, go = threading.Event(), threading.Event()
    ran = []

    def slow(conn):
        entered.set()
        go.wait(30)
        pay(conn)

    t = threading.Thread(target=lambda: ran.append(store.in_tx("pay/y", slow)))
    t.start()
    assert entered.wait(30)
    other = PgStore(pg)
    t2 = threading.Thread(target=lambda: ran.append(other.in_tx("pay/y", pay)))
    t2.start()
    go.set()
    t.join(30)
    t2.join(30)
    assert sorted(ran) == [False, True]
    with psycopg.connect(pg, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM paid").fetchone()[0] == 2
    assert store.prune(3600) == 0
    store.close()
    other.close()


def test_pg_store_creates_a_missing_index(pg):
    # A store made after one that stopped between its two statements (the
    # table made, its index not) makes the index, as the Go pgstore's New.
    import psycopg

    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute('CREATE TABLE keys_no_index (key text COLLATE "C" PRIMARY KEY, '
                     'recorded_at timestamptz NOT NULL DEFAULT now())')
    PgStore(pg, table="keys_no_index")
    with psycopg.connect(pg, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('keys_no_index_recorded_at')").fetchone()[0] is not None
