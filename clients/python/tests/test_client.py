"""The native API client and the stream client against a real broker."""

import json

import pytest

from conftest import eventually
from sluice import Client, SluiceError, StreamClient, StreamEnded, trace
from sluice.stream import message_from_pb, pb


def test_send_receive_nack_reason(client, queue_name):
    client.create_queue(queue_name)
    mid = client.send(queue_name, json.dumps({"n": 1}), priority=7, correlation_id="c-1",
                      attributes={"kind": "order", "amount": 12.5, "raw": b"\x00\xff"}, idempotency_key="order/1")
    [m] = client.receive(queue_name, wait_seconds=5)
    assert (m.id, m.priority, m.correlation_id, m.attempts) == (mid, 7, "c-1", 1)
    assert m.json() == {"n": 1}
    assert m.attribute("kind") == "order" and m.attribute("amount") == "12.5" and m.attribute("raw") == b"\x00\xff"
    assert m.attribute("IdempotencyKey") == "order/1"
    client.nack(queue_name, m.receipt, "smtp timeout", 0)
    [m2] = client.receive(queue_name, wait_seconds=5)
    assert (m2.id, m2.attempts, m2.failure_reason) == (mid, 2, "smtp timeout")
    client.snooze(queue_name, m2.receipt, 600)
    assert client.stats(queue_name)["delayed"] == 1
    with pytest.raises(SluiceError) as e:
        client.ack(queue_name, "not-a-receipt")
    assert e.value.code == "invalid_receipt" and e.value.status == 400


def test_message_status(client, queue_name):
    client.create_queue(queue_name, {"CompletedRetentionSeconds": "600"})
    mid = client.send(queue_name, "job")
    assert client.message_status(queue_name, mid)["state"] == "ready"
    [m] = client.receive(queue_name, wait_seconds=5)
    assert client.message_status(queue_name, mid)["state"] == "inFlight"
    client.nack(queue_name, m.receipt, "smtp timeout", 0)
    st = client.message_status(queue_name, mid)
    assert (st["attempts"], st["reason"], st["failureCount"]) == (1, "smtp timeout", 1)
    assert [f["reason"] for f in st["failures"]] == ["smtp timeout"] and st["failures"][0]["at"]
    [m] = client.receive(queue_name, wait_seconds=5)
    client.ack(queue_name, m.receipt, result='{"sent": true}')
    st = client.message_status(queue_name, mid)
    assert (st["state"], st["result"], st["attempts"]) == ("completed", '{"sent": true}', 2)
    assert client.message_status(queue_name, "00000000-0000-4000-8000-000000000000") is None
    with pytest.raises(SluiceError) as e:
        client.message_status("no-such-queue", mid)
    assert e.value.code == "queue_not_found"


def test_errors_are_codes(client):
    with pytest.raises(SluiceError) as e:
        client.stats("no-such-queue")
    assert (e.value.code, e.value.status) == ("queue_not_found", 404)
    with pytest.raises(SluiceError) as e:
        client.send("no-such-queue", "x")
    assert e.value.code == "queue_not_found"


def test_connection_refused_is_retried_then_raised():
    c = Client("http://127.0.0.1:1", retries=2, backoff_base=0.001)
    with pytest.raises(SluiceError) as e:
        c.stats("q")
    assert e.value.code == "connection"


def test_dead_letter_now_keeps_reason(client, queue_name):
    client.create_queue(queue_name + "-dlq")
    arn = client.get_queue(queue_name + "-dlq")["arn"]
    client.create_queue(queue_name, {"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 5})})
    client.send(queue_name, "bad")
    [m] = client.receive(queue_name, wait_seconds=5)
    client.dead_letter(queue_name, m.receipt, "no customer")
    [d], _ = client.dead_letters(queue_name)
    assert (d.id, d.failure_reason, d.dead_letter_source) == (m.id, "no customer", queue_name)


def test_trace_context_child_of_current(client, queue_name):
    client.create_queue(queue_name)
    parent = trace.new()
    with trace.use(parent):
        client.send(queue_name, "traced")
    client.send(queue_name, "explicit", trace_context=parent)
    client.send(queue_name, "none")
    ms = client.receive(queue_name, max=10, wait_seconds=5)
    ms += client.receive(queue_name, max=10, wait_seconds=1) if len(ms) < 3 else []
    by = {m.body: m.trace_context for m in ms}
    assert by["traced"].split("-")[1] == parent.split("-")[1] and by["traced"] != parent
    assert trace.valid(by["traced"])
    assert by["explicit"] == parent and by["none"] == ""


def test_publish_and_consume(broker, client, queue_name):
    client.create_queue(queue_name)
    with StreamClient(broker.addr) as sc:
        pub = sc.publisher()
        futs = [pub.publish_async(queue_name, f"m{i}", {"body": f"p{i}", "priority": 5}) for i in range(50)]
        ids = set()
        for f in futs:
            rs = f.result(30)
            assert len(rs) == 2 and all(r.error is None for r in rs)
            ids.update(r.message_id for r in rs)
        assert len(ids) == 100
        refused = pub.publish_async("no-such-queue", "x")
        with pytest.raises(SluiceError) as e:
            refused.result(30)
        assert e.value.code == "queue_not_found"
        pub.close()

        con = sc.consume(queue_name, 4, client_name="pytest")
        assert len(con.stream_id) == 16
        got = [con.receive(10) for _ in range(4)]
        assert all(m is not None for m in got)
        # The credit bounds what the stream holds: nothing more comes.
        assert con.receive(0.3) is None
        assert eventually(lambda: [c for c in client.consumers(queue_name) if c["held"] == 4])[0]["clientName"] == "pytest"
        assert message_from_pb(queue_name, got[0]).priority == 5  # priority 5 first
        errs = con.settle([pb.Settlement(receipt=m.receipt, ack=pb.Ack()) for m in got])
        assert errs == [None] * 4
        with pytest.raises(SluiceError) as e:
            con.ack(got[0].receipt)
        assert e.value.code == "invalid_parameter"
        held = [con.receive(10) for _ in range(4)]
        con.close()
        # What the stream held goes back at once, as failed attempts.
        def back():
            ms, _ = client.browse(queue_name, reason="consumer disconnected", limit=100)
            return ms if len(ms) == 4 else None
        back_ids = {m.id for m in eventually(back, what="the held messages back in the queue")}
        assert back_ids == {h.id for h in held}
        with pytest.raises(StreamEnded) as e:
            sc.consume("no-such-queue", 1)
        assert e.value.code == "queue_not_found"
