"""The asyncio worker: :class:`AsyncWorker` runs ``async def`` handlers over a
queue's messages, on grpc's asyncio API (``grpc.aio``).

It behaves as :class:`sluice.Worker` does (the same consumer stream, credit,
outcomes and exceptions: :func:`sluice.worker.outcome_of`), with one
difference asyncio allows: when a stop's grace ends, the handlers still
running are cancelled (``asyncio.CancelledError`` in the handler) and their
messages released, as the Go pool cancels its handlers' contexts.

    async def send_email(message):
        await mailer.send(message.json()["to"])   # returns: ack

    asyncio.run(AsyncWorker(Client(url), "emails", send_email, concurrency=50).run())

The native API calls it makes (the settlements of a stream that ended, and
the heartbeat extending their leases meanwhile) run the synchronous
:class:`sluice.Client` in a thread (``asyncio.to_thread``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import signal
import socket
import time
from typing import Any, Awaitable, Callable

import grpc

from . import trace
from .client import Client, Message
from .errors import SluiceError, StreamEnded
from .stream import _CHANNEL_OPTIONS, _CONSUME, _ended, _target, message_from_pb, pb
from .worker import Outcome, outcome_of

__all__ = ["AsyncWorker"]

log = logging.getLogger("sluice.worker")


def _settlement(receipt: str, o: Outcome) -> pb.Settlement:
    if o.kind == "ack":
        return pb.Settlement(receipt=receipt, ack=pb.Ack())
    if o.kind == "nack":
        n = pb.Nack(reason=o.reason)
        if o.delay is not None:
            n.delay_seconds = o.delay
        return pb.Settlement(receipt=receipt, nack=n)
    if o.kind == "snooze":
        return pb.Settlement(receipt=receipt, snooze=pb.Snooze(seconds=o.delay or 0))
    if o.kind == "dead-letter":
        return pb.Settlement(receipt=receipt, dead_letter=pb.DeadLetter(reason=o.reason))
    return pb.Settlement(receipt=receipt, release=pb.Release())


class _AioStream:
    """One Consume stream on a connection of its own."""

    def __init__(self, channel, call, queue: str):
        self.channel, self.call, self.queue = channel, call, queue
        self.deliveries: asyncio.Queue = asyncio.Queue()
        self.pending: dict[int, asyncio.Future] = {}
        self.seq = itertools.count(1)
        self.ended = asyncio.Event()
        self.err: StreamEnded | None = None
        self.max_hold_seconds = 0
        self.writing = asyncio.Lock()  # grpc.aio takes one write at a time

    async def write(self, req: pb.ConsumeRequest) -> None:
        async with self.writing:
            await self.call.write(req)

    def live(self) -> bool:
        return not self.ended.is_set()

    async def read(self) -> None:
        err = StreamEnded("closed", "the stream ended")
        try:
            while True:
                r = await self.call.read()
                if r is grpc.aio.EOF:
                    break
                kind = r.WhichOneof("kind")
                if kind == "deliveries":
                    for m in r.deliveries.messages:
                        self.deliveries.put_nowait(m)
                elif kind == "settled":
                    fut = self.pending.pop(r.settled.seq, None)
                    if fut is not None and not fut.done():
                        fut.set_result([SluiceError(x.error.code, x.error.message) if x.HasField("error") else None
                                        for x in r.settled.results])
        except grpc.RpcError as e:
            err = _ended(e)
        except asyncio.CancelledError:
            err = StreamEnded("closed", "the stream was cancelled")
        self.err = err
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(err)
        self.pending.clear()
        self.ended.set()

    async def settle(self, settlements: list[pb.Settlement], timeout: float = 30.0) -> list:
        if not self.live():
            raise self.err
        seq = next(self.seq)
        fut = asyncio.get_running_loop().create_future()
        self.pending[seq] = fut
        try:
            await self.write(pb.ConsumeRequest(settle=pb.Settle(seq=seq, settlements=settlements)))
        except (grpc.RpcError, asyncio.InvalidStateError) as e:
            self.pending.pop(seq, None)
            raise StreamEnded("closed", f"the stream ended: {e}") from None
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            self.pending.pop(seq, None)
            raise StreamEnded("timeout", f"no answer to a settlement within {timeout}s") from None

    async def credit(self, n: int) -> None:
        if self.live():
            try:
                await self.write(pb.ConsumeRequest(credit=pb.Credit(credit=n)))
            except (grpc.RpcError, asyncio.InvalidStateError):
                pass

    async def close(self, timeout: float = 10.0) -> None:
        if self.live():
            try:
                async with self.writing:
                    await self.call.done_writing()
                await asyncio.wait_for(self.ended.wait(), timeout)
            except (grpc.RpcError, asyncio.InvalidStateError, asyncio.TimeoutError):
                self.call.cancel()
        await self.channel.close()


class AsyncWorker:
    """Runs the coroutine function ``handler(message)`` over the messages of
    ``queue``; the arguments are :class:`sluice.Worker`'s, ``concurrency``
    being the handlers that run at once (tasks, not threads)."""

    def __init__(self, client: Client, queue: str, handler: Callable[[Message], Awaitable[Any]], *,
                 concurrency: int = 10, prefetch: int = 0, lease_seconds: int = 30, max_hold_seconds: int = 0,
                 client_name: str | None = None, grace_seconds: float = 30.0,
                 logger: logging.Logger | None = None):
        if not 1 <= concurrency <= 10000 or not 0 <= prefetch <= 10000 - concurrency:
            raise ValueError("concurrency 1..10000, and concurrency + prefetch at most 10000")
        self.client, self.queue, self.handler = client, queue, handler
        self.concurrency, self.prefetch = concurrency, prefetch
        self.lease_seconds, self.max_hold_seconds = lease_seconds, max_hold_seconds
        self.client_name = client_name or f"sluice-worker-py {socket.gethostname()}/{os.getpid()}"
        self.grace_seconds = grace_seconds
        self.log = logger or log
        self._stream: _AioStream | None = None
        self._stream_changed = asyncio.Event()
        self._stopped_receiving = asyncio.Event()
        self._stopping = False
        self._stop_requested: asyncio.Event | None = None
        self._tasks: list[asyncio.Task] = []
        self._running: dict[asyncio.Task, tuple[Message, _AioStream]] = {}
        self._idle = asyncio.Event()
        self._beat: asyncio.Task | None = None
        self.handled = self.failed = self.lost = self.released = 0

    def stats(self) -> dict:
        """The pool's counts, as :meth:`sluice.Worker.stats`."""
        return {"running": len(self._running), "handled": self.handled, "failed": self.failed,
                "lost": self.lost, "released": self.released}

    async def run(self, install_signal_handlers: bool = True) -> None:
        """Runs until SIGTERM or SIGINT (when ``install_signal_handlers``) or
        :meth:`stop`, then stops gracefully within ``grace_seconds``."""
        self._stop_requested = asyncio.Event()
        loop = asyncio.get_running_loop()
        if install_signal_handlers:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stop_requested.set)
        self._tasks = [asyncio.create_task(self._supervise())]
        self._tasks += [asyncio.create_task(self._handle_loop()) for _ in range(self.concurrency)]
        self._beat = asyncio.create_task(self._heartbeat())
        try:
            await self._stop_requested.wait()
            await self.stop(self.grace_seconds)
        finally:
            if install_signal_handlers:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)

    async def _heartbeat(self) -> None:
        """Extends, through the native API, the leases of the running
        messages whose stream has ended (a live stream's broker keeps them;
        a broker that restarted left them to run), as sluice.Worker's."""
        lease = self.lease_seconds or 30
        every = max(lease / 3, 1)
        while not self._stopping:
            await asyncio.sleep(every)
            for m, s in [v for v in self._running.values() if not v[1].live()]:
                try:
                    await asyncio.to_thread(self.client.extend, self.queue, m.receipt, lease)
                except SluiceError as e:
                    self.log.warning("sluice worker: extending the lease of message %s: %s", m.id, e)

    async def _open(self) -> _AioStream:
        target, tls = _target(self.client.base_url)
        opts = _CHANNEL_OPTIONS
        channel = (grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options=opts) if tls
                   else grpc.aio.insecure_channel(target, options=opts))
        md = (("authorization", "Bearer " + self.client.token),) if self.client.token else ()
        call = channel.stream_stream(_CONSUME, request_serializer=pb.ConsumeRequest.SerializeToString,
                                     response_deserializer=pb.ConsumeResponse.FromString)(metadata=md)
        try:
            await call.write(pb.ConsumeRequest(open=pb.Open(
                queue=self.queue, credit=self.concurrency + self.prefetch, lease_seconds=self.lease_seconds,
                max_hold_seconds=self.max_hold_seconds, client_name=self.client_name)))
            r = await asyncio.wait_for(call.read(), 30)
            if r is grpc.aio.EOF or r.WhichOneof("kind") != "opened":
                raise StreamEnded("invalid_request", "the broker did not answer the open")
        except grpc.RpcError as e:
            await channel.close()
            raise _ended(e) from None
        except (asyncio.TimeoutError, StreamEnded):
            await channel.close()
            raise StreamEnded("timeout", f"no answer to the open of a stream on {self.queue}") from None
        s = _AioStream(channel, call, self.queue)
        s.max_hold_seconds = r.opened.max_hold_seconds
        return s

    async def _supervise(self) -> None:
        failures, rng = 0, random.Random()
        while not self._stopping:
            try:
                s = await self._open()
            except StreamEnded as e:
                failures += 1
                d = min(0.1 * 2 ** min(failures - 1, 7), 10.0)
                d = d / 2 + rng.uniform(0, d / 2)
                self.log.error("sluice worker: opening a stream on %s failed (%s); retrying in %.1fs", self.queue, e, d)
                await asyncio.sleep(d)
                continue
            failures = 0
            if self._stopping:
                await s.close()
                return
            self._stream = s
            self._stream_changed.set()
            reader = asyncio.create_task(s.read())
            await reader
            if self._stream is s:
                self._stream = None
            if not self._stopping:
                self.log.warning("sluice worker: the stream on %s ended (%s); opening another", self.queue, s.err)
                await s.channel.close()

    async def _next(self) -> tuple[pb.Message, _AioStream] | None:
        while not self._stopping:
            s = self._stream
            if s is None or not s.live():
                self._stream_changed.clear()
                await self._stream_changed.wait()
                continue
            get = asyncio.create_task(s.deliveries.get())
            others = {asyncio.create_task(s.ended.wait()), asyncio.create_task(self._stopped_receiving.wait())}
            await asyncio.wait({get} | others, return_when=asyncio.FIRST_COMPLETED)
            for t in others:
                t.cancel()
            if get.done():
                return get.result(), s
            get.cancel()
        return None

    async def _handle_loop(self) -> None:
        while True:
            try:
                got = await self._next()
            except asyncio.CancelledError:
                return
            if got is None:
                return
            pm, s = got
            m = message_from_pb(self.queue, pm)
            if self._stopping:
                await self._release([m], s)
                continue
            task = asyncio.create_task(self._call(m))
            self._running[task] = (m, s)
            self._idle.clear()
            start = time.monotonic()
            try:
                exc = await asyncio.shield(task)
            except asyncio.CancelledError:
                return
            finally:
                if task.done():
                    self._running.pop(task, None)
                    if not self._running:
                        self._idle.set()
            if task.cancelled():
                continue  # released by the stop
            await self._finish(m, s, exc, start)

    async def _call(self, m: Message) -> BaseException | None:
        with trace.use(m.trace_context):
            try:
                await self.handler(m)
            except Exception as e:  # the handler's failure is the message's outcome
                return e
        return None

    async def _finish(self, m: Message, s: _AioStream, exc, start: float) -> None:
        o = outcome_of(exc)
        if exc is None:
            self.handled += 1
        else:
            self.failed += 1
            self.log.info("sluice worker: handler failed: message %s, attempt %d, outcome %s: %s",
                          m.id, m.attempts, o.kind, o.reason or exc)
        if time.monotonic() - start >= (s.max_hold_seconds or 3600):
            self.lost += 1
            self.log.warning("sluice worker: message %s was held past the stream's maximum hold; outcome %s not "
                             "applied", m.id, o.kind)
            return
        await self._apply(m, s, o)

    async def _apply(self, m: Message, s: _AioStream, o: Outcome) -> None:
        try:
            if s.live():
                try:
                    err = (await s.settle([_settlement(m.receipt, o)]))[0]
                    if err is not None:
                        raise err
                    return
                except StreamEnded:
                    pass
            await asyncio.to_thread(self._settle_native, m, o)
        except SluiceError as e:
            if e.code in ("message_not_in_flight", "invalid_receipt", "invalid_parameter"):
                self.lost += 1
                self.log.warning("sluice worker: the lease of message %s ended before its outcome (%s): %s",
                                 m.id, o.kind, e)
            else:
                self.log.error("sluice worker: applying outcome %s to message %s failed: %s", o.kind, m.id, e)

    def _settle_native(self, m: Message, o: Outcome) -> None:
        c, q = self.client, self.queue
        if o.kind == "ack":
            c.ack(q, m.receipt)
        elif o.kind == "nack":
            c.nack(q, m.receipt, o.reason, o.delay)
        elif o.kind == "snooze":
            c.snooze(q, m.receipt, o.delay or 0)
        elif o.kind == "dead-letter":
            c.dead_letter(q, m.receipt, o.reason)
        else:
            c.release(q, m.receipt)

    async def _release(self, msgs: list[Message], s: _AioStream) -> None:
        if not msgs:
            return
        try:
            await s.settle([_settlement(m.receipt, Outcome("release")) for m in msgs])
        except StreamEnded:
            for m in msgs:
                try:
                    await asyncio.to_thread(self.client.release, self.queue, m.receipt)
                except SluiceError as e:
                    self.log.warning("sluice worker: releasing message %s: %s", m.id, e)
        self.released += len(msgs)

    def _undelivered(self, s: _AioStream) -> list[Message]:
        """The messages s delivered that no handler took."""
        out = []
        while not s.deliveries.empty():
            out.append(message_from_pb(self.queue, s.deliveries.get_nowait()))
        return out

    async def stop(self, grace: float = 30.0) -> bool:
        """Stops gracefully, as :meth:`sluice.Worker.stop`, but cancels the
        handlers still running when the grace ends (their messages are
        released). Returns whether every handler finished in time."""
        if self._stopping:
            return True
        self._stopping = True
        if self._stop_requested is not None:
            self._stop_requested.set()
        self._stream_changed.set()
        self._stopped_receiving.set()
        s = self._stream
        if s is not None and s.live():
            await s.credit(0)
            # An empty settle's answer comes after the broker has read the
            # credit frame before it and sent every message it handed the
            # stream: all have arrived by then (a broker older than that
            # barrier may still push a few; a release before the close
            # catches them), as sluice.Worker's stop.
            try:
                await s.settle([], timeout=10)
            except SluiceError:
                pass
            await self._release(self._undelivered(s), s)
        finished = True
        if self._running:
            try:
                await asyncio.wait_for(self._idle.wait(), grace)
            except asyncio.TimeoutError:
                finished = False
        if not finished:
            running = list(self._running.items())
            for task, _ in running:
                task.cancel()
            for task, (m, ms) in running:
                await asyncio.gather(task, return_exceptions=True)
                self._running.pop(task, None)
                await self._release([m], ms)
            self.log.warning("sluice worker: the grace ended: %d handlers cancelled, their messages released",
                             len(running))
        # The handler loops end on their own (each settles what it ran);
        # then the stream closes, holding nothing, which ends the supervisor.
        supervisor, loops = self._tasks[0], self._tasks[1:]
        await asyncio.gather(*loops, return_exceptions=True)
        if self._beat is not None:
            self._beat.cancel()
            await asyncio.gather(self._beat, return_exceptions=True)
        if self._stream is not None:
            # A delivery that came after the first release would go back as a
            # failed attempt ("consumer disconnected") with the close.
            if self._stream.live():
                await self._release(self._undelivered(self._stream), self._stream)
            await self._stream.close()
            self._stream = None
        try:
            await asyncio.wait_for(asyncio.shield(supervisor), 10)
        except asyncio.TimeoutError:
            supervisor.cancel()
        return finished
