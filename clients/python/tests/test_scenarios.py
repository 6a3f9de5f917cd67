"""The lab seed's scenarios, against a real broker: a poison message, a slow
worker losing its lease to a fast one, a worker killed with kill -9 (every
message's effect exactly once through the idempotency helper), and a
graceful stop that loses nothing."""

import json
import logging
import os
import signal
import subprocess
import sys
import threading

from conftest import HERE, eventually
from sluice import Worker


def test_poison_message_dead_lettered_with_reason(client, queue_name):
    client.create_queue(queue_name + "-dlq")
    arn = client.get_queue(queue_name + "-dlq")["arn"]
    client.create_queue(queue_name, {"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})})
    done = []
    poison_attempts = []

    def handler(m):
        order = m.json()
        if order["id"] == 13:
            poison_attempts.append(m.attempts)
            raise ValueError(f"order {order['id']} has no customer")
        done.append(order["id"])

    for i in range(20):
        client.send(queue_name, json.dumps({"id": i}))
    w = Worker(client, queue_name, handler, concurrency=4)
    w.start()
    try:
        eventually(lambda: client.stats(queue_name)["deadLetters"] == 1 and len(done) == 19,
                   what="the poison dead-lettered and the rest handled")
    finally:
        w.stop(10)
    assert sorted(done) == [i for i in range(20) if i != 13]
    assert poison_attempts == [1, 2, 3]
    [d], _ = client.dead_letters(queue_name)
    assert json.loads(d.body)["id"] == 13
    assert (d.failure_reason, d.attempts) == ("order 13 has no customer", 3)


def test_slow_worker_loses_lease_fast_one_takes_it(client, queue_name, caplog):
    client.create_queue(queue_name)
    slow_started = threading.Event()
    fast_done = threading.Event()
    handled_by = []
    fast_seen = []

    def slow(m):
        slow_started.set()
        fast_done.wait(60)  # hung past its maximum hold
        handled_by.append("slow")

    def fast(m):
        handled_by.append("fast")
        fast_seen.append((m.attempts, m.failure_reason))
        fast_done.set()

    # The broker keeps a stream's lease alive for max_hold_seconds only.
    ws = Worker(client, queue_name, slow, concurrency=1, lease_seconds=1, max_hold_seconds=1, client_name="slow")
    ws.start()
    eventually(lambda: client.consumers(queue_name), what="the slow worker's stream")
    mid = client.send(queue_name, "work")
    slow_started.wait(30)
    wf = Worker(client, queue_name, fast, concurrency=1, client_name="fast")
    wf.start()
    try:
        assert fast_done.wait(60), "the fast worker never got the message"
        eventually(lambda: "slow" in handled_by and ws.stats()["held"] == 0, what="the slow handler's end")
        eventually(lambda: client.stats(queue_name)["depth"] == 0, what="the queue empty")
    finally:
        with caplog.at_level(logging.WARNING, logger="sluice.worker"):
            ws.stop(10)
        wf.stop(10)
    assert handled_by == ["fast", "slow"]
    # The fast worker got it because the slow one's lease ended at its
    # maximum hold; the slow one's late ack changed nothing (it was skipped,
    # refused, or a no-op on a stale receipt).
    [(attempts, reason)] = fast_seen
    assert attempts >= 2 and reason == "lease expired"
    assert wf.stats()["handled"] == 1 and client.stats(queue_name)["depth"] == 0
    assert mid


def _spawn(pyenv, broker, queue, mode, target):
    return subprocess.Popen([sys.executable, os.path.join(HERE, "worker_proc.py"), broker.url, queue, mode, target],
                            env=pyenv)


def test_kill9_exactly_once_with_idempotency(client, broker, queue_name, pg, pyenv):
    import psycopg

    with psycopg.connect(pg, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS effects (key text NOT NULL)")
        conn.execute("CREATE TABLE IF NOT EXISTS skips (key text NOT NULL)")
        conn.execute("TRUNCATE effects, skips")

    def effects():
        with psycopg.connect(pg, autocommit=True) as conn:
            return dict(conn.execute("SELECT key, count(*) FROM effects GROUP BY key").fetchall())

    n = 400
    client.create_queue(queue_name)
    for i in range(0, n, 10):
        client.send_batch(queue_name, [{"body": "pay", "idempotency_key": f"pay/{j}"} for j in range(i, i + 10)])
    first = _spawn(pyenv, broker, queue_name, "pg", pg)
    try:
        eventually(lambda: len(effects()) >= n // 4, timeout=60, what="a quarter of the effects")
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    finally:
        first.kill()
    killed_at = len(effects())
    assert killed_at < n, "the worker finished before it was killed: nothing was tested"
    second = _spawn(pyenv, broker, queue_name, "pg", pg)
    try:
        eventually(lambda: len(effects()) == n and client.stats(queue_name)["depth"] == 0, timeout=120,
                   what="every message processed")
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    finally:
        second.kill()
    counts = effects()
    assert set(counts) == {f"pay/{j}" for j in range(n)}
    assert [k for k, c in counts.items() if c != 1] == []
    with psycopg.connect(pg, autocommit=True) as conn:
        skips = conn.execute("SELECT count(*) FROM skips").fetchone()[0]
    # The killed worker's running handlers had committed their effects and
    # not acked: their messages came back, and their keys skipped them.
    assert skips >= 1
    print(f"figures: {n} messages, worker killed at {killed_at} effects, {skips} redeliveries of done work "
          "skipped by their key, each effect once")


def test_graceful_stop_loses_nothing(client, broker, queue_name, pyenv, tmp_path):
    out = str(tmp_path / "handled")

    def lines():
        try:
            with open(out) as f:
                return [line.split() for line in f.read().splitlines()]
        except FileNotFoundError:
            return []

    n = 300
    client.create_queue(queue_name)
    ids = set()
    for i in range(0, n, 10):
        ids.update(r.message_id for r in client.send_batch(queue_name, [f"m{j}" for j in range(i, i + 10)]))
    first = _spawn(pyenv, broker, queue_name, "file", out)
    try:
        eventually(lambda: len(lines()) >= n // 4, timeout=60, what="a quarter handled")
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0
    finally:
        first.kill()
    stopped_at = len(lines())
    assert stopped_at < n, "the worker finished before it was stopped: nothing was tested"
    # Nothing is held after the stop: the handlers finished and acked, the
    # unstarted messages went back.
    st = client.stats(queue_name)
    assert st["inFlight"] == 0 and st["visible"] == n - stopped_at, st
    second = _spawn(pyenv, broker, queue_name, "file", out)
    try:
        eventually(lambda: len(lines()) >= n and client.stats(queue_name)["depth"] == 0, timeout=120,
                   what="every message handled")
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    finally:
        second.kill()
    got = lines()
    assert sorted(i for i, _ in got) == sorted(ids)  # each once
    assert {a for _, a in got} == {"1"}  # no attempt failed or was counted twice
