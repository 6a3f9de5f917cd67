"""The asyncio worker: outcomes, the concurrency limit, and a stop that
cancels the handlers still running when its grace ends."""

import asyncio
import json

from conftest import eventually
from sluice import DeadLetterNow, trace
from sluice.aio import AsyncWorker


async def until(cond, timeout=30.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "the condition did not hold in time"
        await asyncio.sleep(0.02)


def test_async_worker_outcomes(client, queue_name):
    client.create_queue(queue_name + "-dlq")
    arn = client.get_queue(queue_name + "-dlq")["arn"]
    client.create_queue(queue_name, {"RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 5})})
    parent = trace.new()
    seen = []
    now = {"running": 0, "max": 0}

    async def handler(m):
        now["running"] += 1
        now["max"] = max(now["max"], now["running"])
        try:
            await asyncio.sleep(0.05)  # the work
            seen.append((m.body, m.attempts, trace.current()))
            if m.body == "fail" and m.attempts == 1:
                raise RuntimeError("smtp timeout")
            if m.body == "dead":
                raise DeadLetterNow("no customer")
        finally:
            now["running"] -= 1

    client.send(queue_name, "traced", trace_context=parent)
    client.send(queue_name, "fail")
    client.send(queue_name, "dead")
    client.send_batch(queue_name, [f"m{i}" for i in range(10)])

    async def main():
        w = AsyncWorker(client, queue_name, handler, concurrency=3)
        run = asyncio.create_task(w.run(install_signal_handlers=False))
        await until(lambda: len(seen) == 14)
        assert await w.stop(10)
        await run
        return w

    w = asyncio.run(main())
    assert now["max"] == 3
    assert ("traced", 1, parent) in seen
    assert [a for b, a, _ in seen if b == "fail"] == [1, 2]
    st = eventually(lambda: (s := client.stats(queue_name))["inFlight"] == 0 and s)
    assert (st["visible"], st["deadLetters"]) == (0, 1)
    [d], _ = client.dead_letters(queue_name)
    assert (d.body, d.failure_reason) == ("dead", "no customer")
    assert w.stats()["handled"] == 12 and w.stats()["failed"] == 2


def test_async_stop_cancels_past_grace(client, queue_name):
    client.create_queue(queue_name)
    client.send_batch(queue_name, ["slow", "next"])
    cancelled = []

    async def handler(m):
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append(m.body)
            raise

    async def main():
        w = AsyncWorker(client, queue_name, handler, concurrency=1, prefetch=1)
        run = asyncio.create_task(w.run(install_signal_handlers=False))
        await until(lambda: w.stats()["running"] == 1 and client.stats(queue_name)["inFlight"] == 2)
        assert not await w.stop(0.2)
        await run
        return w

    w = asyncio.run(main())
    assert len(cancelled) == 1 and w.stats()["released"] == 2
    ms = client.receive(queue_name, max=10, wait_seconds=1)
    assert sorted(m.body for m in ms) == ["next", "slow"]
    assert [m.attempts for m in ms] == [1, 1]  # released, not counted


def test_async_stop_releases_what_came_after_the_credit(client, queue_name):
    # A stop amid deliveries: what the broker pushed before it read the
    # credit of 0 comes after the stop took the delivered messages. It must
    # be released (its attempt not counted), not handed back with the close
    # as a failed attempt ("consumer disconnected"). The race is the
    # broker's, so the stop runs several times (it lost a message in about
    # one run in seven before the fix).
    for run_no in range(12):
        q = f"{queue_name}-{run_no}"
        client.create_queue(q)
        client.send_batch(q, [f"m{i}" for i in range(10)])
        client.send_batch(q, [f"m{i}" for i in range(10, 20)])
        done = []

        async def main():
            stop = asyncio.Event()

            async def handler(m):
                await asyncio.sleep(0.003)
                done.append(m.body)
                if len(done) == 8:
                    stop.set()

            w = AsyncWorker(client, q, handler, concurrency=4, prefetch=6)
            run = asyncio.create_task(w.run(install_signal_handlers=False))
            await stop.wait()
            assert await w.stop(10)
            await run

        asyncio.run(main())
        st = eventually(lambda: (s := client.stats(q))["inFlight"] == 0 and s)
        assert st["visible"] == 20 - len(done)
        back = []
        while ms := client.receive(q, max=10, wait_seconds=0):
            back += ms
        failed = [(m.body, m.attempts, m.failure_reason) for m in back if m.attempts > 1 or m.failure_reason]
        assert not failed, f"run {run_no}: back as failed attempts: {failed}"


def test_async_worker_keeps_leases_across_broker_restart(sluice_bin, tmp_path, queue_name):
    # As sluice.Worker: the handler running when the broker restarts keeps
    # its lease (a heartbeat extends it through the native API: the broker
    # left it to run), and settles through the native API once done. Its
    # lease is 3 s and it runs past three of them, so without the heartbeat
    # the message comes back and is handled twice.
    import signal as signals

    from conftest import Broker
    from sluice import Client

    data = str(tmp_path / "data")
    b = Broker(sluice_bin, data)
    try:
        client = Client(b.url, retries=10)
        client.create_queue(queue_name)
        handled, starts = [], []

        async def main():
            nonlocal b
            started, finish = asyncio.Event(), asyncio.Event()

            async def handler(m):
                starts.append((m.body, m.receive_count))
                if m.body == "first":
                    started.set()
                    await finish.wait()
                handled.append((m.body, m.receive_count))

            w = AsyncWorker(client, queue_name, handler, concurrency=2, lease_seconds=3)
            run = asyncio.create_task(w.run(install_signal_handlers=False))
            try:
                await asyncio.to_thread(client.send, queue_name, "first")
                await asyncio.wait_for(started.wait(), 30)
                await asyncio.to_thread(b.stop, signals.SIGTERM)
                b = await asyncio.to_thread(Broker, sluice_bin, data, b.addr)
                # Three leases' time: the lease would have run out twice over.
                await asyncio.sleep(9)
                assert starts == [("first", 1)], "the message came back while its handler ran"
                finish.set()
                await until(lambda: handled == [("first", 1)], timeout=30)
                await until(lambda: client.stats(queue_name)["depth"] == 0, timeout=30)
                assert w.stats()["lost"] == 0
            finally:
                finish.set()
                await w.stop(10)
                await run

        asyncio.run(main())
        assert handled == [("first", 1)]
    finally:
        b.stop()
