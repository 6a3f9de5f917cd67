"""A worker across a restart of its broker: the stream ends, the handler that
was running settles through the native API (the broker left its lease to
run), and the pool opens a new stream for the next messages."""

import signal
import threading

from conftest import Broker, eventually
from sluice import Client, Worker


def test_worker_survives_broker_restart(sluice_bin, tmp_path, queue_name):
    data = str(tmp_path / "data")
    b = Broker(sluice_bin, data)
    try:
        client = Client(b.url, retries=10)
        client.create_queue(queue_name)
        started = threading.Event()
        finish = threading.Event()
        handled = []

        def handler(m):
            if m.body == "first":
                started.set()
                finish.wait(60)
            handled.append(m.body)

        w = Worker(client, queue_name, handler, concurrency=2, lease_seconds=60)
        w.start()
        try:
            client.send(queue_name, "first")
            assert started.wait(30)
            # A graceful stop of the broker ends the streams and leaves their
            # leases to run; it comes back on the same address and data.
            b.stop(signal.SIGTERM)
            b = Broker(sluice_bin, data, b.addr)
            finish.set()
            eventually(lambda: handled == ["first"] and w.stats()["held"] == 0, what="the first message settled")
            client.send(queue_name, "second")
            eventually(lambda: handled == ["first", "second"], timeout=60, what="the second message over a new stream")
            eventually(lambda: client.stats(queue_name)["depth"] == 0, what="both acked")
            assert w.stats()["lost"] == 0
        finally:
            w.stop(10)
    finally:
        b.stop()
