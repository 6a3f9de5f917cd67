"""The worker pool's outcomes, concurrency and stop against a real broker."""

import json
import threading


from conftest import eventually
from sluice import DeadLetterNow, RetryAfter, Snooze, Worker, json_handler, trace
from sluice.worker import Outcome, clean_reason, outcome_of


def with_dlq(client, name, max_receive=3):
    client.create_queue(name + "-dlq")
    arn = client.get_queue(name + "-dlq")["arn"]
    client.create_queue(name, {"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": max_receive})})


def test_outcome_of():
    assert outcome_of(None) == Outcome("ack")
    assert outcome_of(ValueError("boom")) == Outcome("nack", "boom")
    assert outcome_of(KeyError()) == Outcome("nack", "KeyError")
    assert outcome_of(RetryAfter(1.2, "later")) == Outcome("nack", "later", 2)
    assert outcome_of(Snooze(10**9)) == Outcome("snooze", delay=43200)
    assert outcome_of(DeadLetterNow("never")) == Outcome("dead-letter", "never")
    assert clean_reason("a\x00b") == "a\ufffdb"
    assert len(clean_reason("é" * 1000).encode()) == 1024


def test_outcomes(client, queue_name):
    with_dlq(client, queue_name, max_receive=5)
    seen = {}
    lock = threading.Lock()
    parent = trace.new()

    @json_handler
    def handler(m, p):
        with lock:
            seen.setdefault(p["do"], []).append((m.attempts, m.failure_reason, trace.current()))
        if p["do"] == "fail" and m.attempts == 1:
            raise RuntimeError("smtp timeout")
        if p["do"] == "snooze" and len(seen["snooze"]) == 1:
            raise Snooze(1)
        if p["do"] == "later":
            raise RetryAfter(3600, "come back in an hour")
        if p["do"] == "dead":
            raise DeadLetterNow("no customer")

    for do in ("ok", "fail", "snooze", "later", "dead"):
        client.send(queue_name, json.dumps({"do": do}), trace_context=parent if do == "ok" else None)
    client.send(queue_name, "not json")
    w = Worker(client, queue_name, handler, concurrency=4)
    w.start()
    try:
        eventually(lambda: len(seen.get("fail", [])) == 2 and len(seen.get("snooze", [])) == 2
                   and w.stats()["held"] == 0 and client.stats(queue_name)["inFlight"] == 0,
                   what="the retries handled")
        st = client.stats(queue_name)
        assert (st["visible"], st["delayed"], st["deadLetters"]) == (0, 1, 2), st
    finally:
        assert w.stop(10)
    assert seen["ok"] == [(1, "", parent)]
    assert seen["fail"][1][:2] == (2, "smtp timeout")
    assert seen["snooze"][1][0] == 1  # a snooze gives the attempt back
    dead = {d.body: d.failure_reason for d in client.dead_letters(queue_name)[0]}
    assert dead[json.dumps({"do": "dead"})] == "no customer"
    assert dead["not json"].startswith("the body is not JSON")


def test_concurrency_limit(client, queue_name):
    client.create_queue(queue_name)
    release = threading.Event()
    lock = threading.Lock()
    now = {"running": 0, "max": 0, "done": 0}

    def handler(m):
        with lock:
            now["running"] += 1
            now["max"] = max(now["max"], now["running"])
        release.wait(30)
        with lock:
            now["running"] -= 1
            now["done"] += 1

    client.send_batch(queue_name, [f"m{i}" for i in range(10)])
    client.send_batch(queue_name, [f"n{i}" for i in range(10)])
    w = Worker(client, queue_name, handler, concurrency=3, prefetch=2)
    w.start()
    try:
        eventually(lambda: now["running"] == 3, what="three handlers running")
        # The credit is concurrency + prefetch: the broker pushes no more.
        eventually(lambda: client.stats(queue_name)["inFlight"] == 5, what="5 in flight")
        release.set()
        eventually(lambda: now["done"] == 20, what="every message handled")
    finally:
        w.stop(10)
    assert now["max"] == 3


def test_stop_finishes_running_and_releases_prefetched(client, queue_name):
    client.create_queue(queue_name)
    started = threading.Event()
    finish = threading.Event()
    handled = []

    def handler(m):
        started.set()
        finish.wait(30)
        handled.append(m.id)

    client.send_batch(queue_name, ["a", "b", "c", "d"])
    w = Worker(client, queue_name, handler, concurrency=1, prefetch=3)
    w.start()
    started.wait(30)
    eventually(lambda: client.stats(queue_name)["inFlight"] == 4, what="4 in flight")
    stopped = threading.Thread(target=lambda: w.stop(30))
    stopped.start()
    # The prefetched messages go back at once, attempts not counted, while
    # the running handler still runs.
    eventually(lambda: client.stats(queue_name)["visible"] == 3, what="3 released")
    assert not handled
    finish.set()
    stopped.join(30)
    assert len(handled) == 1 and w.stats()["released"] == 3
    st = client.stats(queue_name)
    assert (st["visible"], st["inFlight"]) == (3, 0)
    ms = client.receive(queue_name, max=10, wait_seconds=1)
    assert sorted(m.attempts for m in ms) == [1, 1, 1]


def test_stop_past_grace_releases_running(client, queue_name):
    client.create_queue(queue_name)
    started = threading.Event()
    finish = threading.Event()

    def handler(m):
        started.set()
        finish.wait(30)

    client.send(queue_name, "slow")
    w = Worker(client, queue_name, handler, concurrency=1)
    w.start()
    started.wait(30)
    assert w.stop(0.2) is False
    finish.set()
    [m] = client.receive(queue_name, wait_seconds=5)
    assert m.attempts == 1 and m.failure_reason == ""  # released, not failed
