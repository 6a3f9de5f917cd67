/**
 * The worker pool: runs a handler over the messages of one queue, with a concurrency limit,
 * a credit (prefetch), leases kept alive, handler outcomes, and a graceful stop driven by an
 * AbortSignal.
 *
 * @packageDocumentation
 */

import { hostname } from "node:os";

import { Attribute, Client, ReceivedMessage, sleep } from "./client.js";
import { LeaseLostError, ShutdownError } from "./errors.js";
import { Outcome, deadLetterNow, errorText, outcomeOf } from "./outcome.js";
import { ConsumerStream, Settlement, StreamMessage } from "./stream.js";
import { withTraceParent } from "./trace.js";

/** A message as a handler sees it. */
export interface Message {
  /** The queue it came from. */
  readonly queue: string;
  readonly id: string;
  readonly body: string;
  readonly attributes: Readonly<Record<string, Attribute>>;
  readonly priority: number;
  /** Its attempts, this one included (a snooze or a release gives one back). */
  readonly attempts: number;
  /** Its deliveries, this one included. */
  readonly receiveCount: number;
  /** Its attempt limit; 0 when the queue has no RedrivePolicy. */
  readonly maxAttempts: number;
  readonly sentAt: Date;
  readonly correlationId: string;
  /** Its W3C traceparent, as sent ("" when none). */
  readonly traceContext: string;
  readonly groupId: string;
  /** The reason of its latest failure ("" when none). */
  readonly failureReason: string;
  /** Its lease's receipt. */
  readonly receipt: string;
}

/** What a handler gets beside its message. */
export interface HandlerContext {
  /**
   * Aborted when the handler should give up: its lease was lost (reason a
   * {@link LeaseLostError}: its outcome will not be applied) or the pool's stop ran out of
   * grace (reason a {@link ShutdownError}).
   */
  readonly signal: AbortSignal;
}

/**
 * A handler: resolving acks the message; throwing nacks it with the error's text as the
 * reason, unless the error is one of {@link retryAfter}, {@link snooze} or
 * {@link deadLetterNow} (see {@link outcomeOf}).
 */
export type Handler = (message: Message, ctx: HandlerContext) => Promise<void> | void;

/**
 * A handler of JSON bodies: the body is parsed and passed as `payload`. A body that does not
 * parse can never succeed: it is dead-lettered at once with the parse error as the reason.
 */
export function json<T>(fn: (message: Message, payload: T, ctx: HandlerContext) => Promise<void> | void): Handler {
  return (message, ctx) => {
    let payload: T;
    try {
      payload = JSON.parse(message.body) as T;
    } catch (err) {
      throw deadLetterNow(`invalid JSON body: ${errorText(err)}`);
    }
    return fn(message, payload, ctx);
  };
}

/**
 * Routes on the String message attribute `attr` (as a web router routes on a path). A type
 * without a route is nacked (an older worker hands back a type a newer one knows), with the
 * reason `no handler for message type "..."`, unless `notFound` handles it.
 */
export function mux(attr: string, routes: Record<string, Handler>, notFound?: Handler): Handler {
  return (message, ctx) => {
    const type = message.attributes[attr]?.value ?? "";
    const h = Object.hasOwn(routes, type) ? routes[type] : notFound;
    if (!h) throw new Error(`no handler for message type ${JSON.stringify(type)}`);
    return h(message, ctx);
  };
}

/** Where the pool logs (console's methods fit). */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** The pool's settings; unset fields take the defaults named. */
export interface PoolConfig {
  /** The broker's client. Required. */
  client: Client;
  /** The queue's name. Required. */
  queue: string;
  /** The handler. Required. */
  handler: Handler;
  /**
   * `stream` (default): a consumer stream pushes messages up to the credit, and the broker
   * keeps their leases. `http`: long-polling receives of the native API, and a heartbeat
   * that extends the leases (for a path that does not pass HTTP/2).
   */
  protocol?: "stream" | "http";
  /** Handlers running at once, 1..10000 (default 10). */
  concurrency?: number;
  /** Messages held received but not started, beyond the running ones, 0..10000 (default 0). A stream's credit is `concurrency + prefetch`. */
  prefetch?: number;
  /** Each message's lease in seconds, 1..43200 (default 30). */
  leaseSeconds?: number;
  /** Stream: how long the broker keeps extending one message's lease, 1..43200 s (default 3600); past it the handler's signal aborts with a {@link LeaseLostError}. */
  maxHoldSeconds?: number;
  /** HTTP: a receive's long poll, 0..20 s (default 20). */
  waitSeconds?: number;
  /** How often the leases no live stream keeps are extended, in seconds (default `leaseSeconds / 3`): every held one over HTTP; over a stream, those of a stream that ended (their outcomes go through the native API). */
  heartbeatSeconds?: number;
  /** How long a stop lets running handlers finish before it aborts them, in ms (default 30000). */
  shutdownTimeoutMs?: number;
  /** The consumer's name in the broker's consumer list (default `sluice-worker-ts HOST/PID`). */
  clientName?: string;
  /** Where failures, lost leases and the stop are logged (default: warnings and errors to the console). */
  logger?: Logger;
  /** Called after a handler resolved, with its duration in ms. */
  onHandled?: (message: Message, ms: number) => void;
  /** Called after a handler threw, with what it threw and its duration in ms. */
  onFailed?: (message: Message, err: unknown, ms: number) => void;
}

/** The pool's counts. */
export interface PoolStats {
  running: number;
  prefetched: number;
  handled: number;
  failed: number;
}

/** A message the pool holds, from its delivery to its outcome. */
interface Held {
  message: Message;
  /** The stream it came on (undefined: received over HTTP). */
  stream: ConsumerStream | undefined;
  state: "prefetched" | "running" | "settling";
  abort: AbortController;
  /** The lease was lost: the handler's result is not applied. */
  lost: boolean;
  holdTimer?: NodeJS.Timeout;
  /** The heartbeat's extend in flight, which the outcome waits for. */
  extending?: Promise<void>;
}

interface PendingSettlement {
  s: Settlement;
  h: Held;
  resolve: () => void;
  reject: (err: Error) => void;
}

const consoleLogger: Logger = {
  info: () => {},
  warn: (m, f) => console.warn(`sluice worker: ${m}`, f ?? ""),
  error: (m, f) => console.error(`sluice worker: ${m}`, f ?? ""),
};

/** Each outcome is applied with a time limit of its own, so that it is applied while the pool stops. */
const OUTCOME_TIMEOUT_MS = 10_000;

/**
 * A pool of handlers over one queue. `run(signal)` runs it until the signal aborts, then
 * stops gracefully: it stops receiving, hands the prefetched, unstarted messages back at once
 * (a release: the attempt does not count), lets running handlers finish (their leases kept)
 * for up to `shutdownTimeoutMs`, then aborts them (a {@link ShutdownError}) and waits for
 * them, applies every outcome and closes the stream. Nothing it held is lost: each message
 * is acked, nacked, released, or left to its lease.
 */
export class Pool {
  private readonly cfg: Required<Omit<PoolConfig, "onHandled" | "onFailed" | "heartbeatSeconds">> &
    Pick<PoolConfig, "onHandled" | "onFailed"> & { heartbeatSeconds: number };
  private readonly held = new Map<string, Held>();
  private readonly ready: Held[] = [];
  private running = 0;
  private handled = 0;
  private failed = 0;
  private stopping = false;
  private interrupted = false;
  private started = false;
  private readonly stopCtl = new AbortController();
  private readonly applying = new Set<Promise<void>>();
  private changed: (() => void)[] = [];
  private batch: PendingSettlement[] = [];
  private batchScheduled = false;

  constructor(config: PoolConfig) {
    const lease = config.leaseSeconds ?? 30;
    this.cfg = {
      client: config.client, queue: config.queue, handler: config.handler,
      protocol: config.protocol ?? "stream",
      concurrency: config.concurrency ?? 10,
      prefetch: config.prefetch ?? 0,
      leaseSeconds: lease,
      maxHoldSeconds: config.maxHoldSeconds ?? 3600,
      waitSeconds: config.waitSeconds ?? 20,
      heartbeatSeconds: config.heartbeatSeconds ?? lease / 3,
      shutdownTimeoutMs: config.shutdownTimeoutMs ?? 30_000,
      clientName: config.clientName ?? `sluice-worker-ts ${hostname()}/${process.pid}`,
      logger: config.logger ?? consoleLogger,
      onHandled: config.onHandled, onFailed: config.onFailed,
    };
    const c = this.cfg;
    const check = (name: string, v: number, lo: number, hi: number) => {
      if (!Number.isInteger(v) || v < lo || v > hi) throw new RangeError(`sluice: PoolConfig.${name} ${v}: use a whole number from ${lo} to ${hi}`);
    };
    if (!(c.client instanceof Client)) throw new TypeError("sluice: PoolConfig.client is required");
    if (!c.queue) throw new TypeError("sluice: PoolConfig.queue is required");
    if (typeof c.handler !== "function") throw new TypeError("sluice: PoolConfig.handler is required");
    if (c.protocol !== "stream" && c.protocol !== "http") throw new RangeError(`sluice: PoolConfig.protocol ${c.protocol}: use "stream" or "http"`);
    check("concurrency", c.concurrency, 1, 10_000);
    check("prefetch", c.prefetch, 0, 10_000 - c.concurrency);
    check("leaseSeconds", c.leaseSeconds, 1, 43_200);
    check("maxHoldSeconds", c.maxHoldSeconds, 1, 43_200);
    check("waitSeconds", c.waitSeconds, 0, 20);
    if (!(c.heartbeatSeconds > 0 && c.heartbeatSeconds < c.leaseSeconds)) {
      throw new RangeError(`sluice: PoolConfig.heartbeatSeconds ${c.heartbeatSeconds}: use more than 0 and less than leaseSeconds (${c.leaseSeconds})`);
    }
    if (!(c.shutdownTimeoutMs >= 0)) throw new RangeError(`sluice: PoolConfig.shutdownTimeoutMs ${c.shutdownTimeoutMs}: use 0 or more`);
  }

  /** The pool's counts now. */
  stats(): PoolStats {
    return { running: this.running, prefetched: this.ready.length, handled: this.handled, failed: this.failed };
  }

  /**
   * Runs the pool until `signal` aborts, then stops it gracefully (see the class) and
   * resolves. A pool runs once.
   */
  async run(signal?: AbortSignal): Promise<void> {
    if (this.started) throw new Error("sluice: a Pool runs once");
    this.started = true;
    const onAbort = () => this.beginStop();
    if (signal?.aborted) this.beginStop();
    else signal?.addEventListener("abort", onAbort, { once: true });
    try {
      if (this.cfg.protocol === "stream") await this.streamLoop();
      else await this.httpLoop();
    } finally {
      signal?.removeEventListener("abort", onAbort);
    }
  }

  private beginStop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.stopCtl.abort(new ShutdownError());
    // Prefetched, unstarted messages go back at once.
    for (const h of this.ready.splice(0)) this.finish(h, { kind: "release" });
    this.wake();
  }

  /** Resolves at the next change of what the pool holds, or at the stop. */
  private nextChange(): Promise<void> {
    return new Promise((resolve) => this.changed.push(resolve));
  }

  private wake(): void {
    for (const f of this.changed.splice(0)) f();
  }

  // ---- the stream source

  private async streamLoop(): Promise<void> {
    // The broker keeps the leases of what a live stream holds; the heartbeat extends, through
    // the native API, those of the messages whose stream ended (a broker restart leaves
    // their leases running while their handlers finish).
    const heartbeat = setInterval(() => this.heartbeat(), this.cfg.heartbeatSeconds * 1000);
    try {
      await this.streamLoopInner();
    } finally {
      clearInterval(heartbeat);
    }
  }

  private async streamLoopInner(): Promise<void> {
    const c = this.cfg;
    let backoff = 100;
    while (!this.stopping) {
      let ended!: () => void;
      const endedP = new Promise<void>((r) => (ended = r));
      let stream: ConsumerStream;
      try {
        stream = await ConsumerStream.open(c.client, c.queue, {
          credit: c.concurrency + c.prefetch, leaseSeconds: c.leaseSeconds, maxHoldSeconds: c.maxHoldSeconds,
          clientName: c.clientName,
          onMessages: (ms, s) => this.accept(ms.map((m) => fromStream(c.queue, m)), s),
          onEnd: (err) => {
            if (err && !this.stopping) c.logger.warn("the consumer stream ended; opening a new one", { queue: c.queue, err: errorText(err) });
            ended();
          },
        });
      } catch (err) {
        if (this.stopping) break;
        c.logger.warn("could not open a consumer stream", { queue: c.queue, err: errorText(err) });
        await this.pause(backoff);
        backoff = Math.min(10_000, backoff * 2);
        continue;
      }
      backoff = 100;
      await Promise.race([endedP, this.stopped()]);
      if (this.stopping) {
        // The broker pushes until it reads the credit of 0, and those deliveries may come
        // after the drain: a close would hand them back as failed attempts ("consumer
        // disconnected"). An empty settle's answer comes after the broker read the frames
        // before it and sent every message it handed the stream, so all have arrived by then
        // and accept released them; a last round trip before the close catches any a broker
        // older than that barrier still pushed.
        if (!stream.isEnded) {
          stream.setCredit(0);
          await this.roundTrip(stream);
        }
        await this.drain();
        if (!stream.isEnded) {
          await this.roundTrip(stream);
          await this.drain();
        }
        await stream.close();
        return;
      }
      // The stream ended under us: the broker handed back what it pushed and no handler
      // took (when it stayed up; after a restart their leases run on). Running handlers
      // finish, and their outcomes go through the native API.
      for (const h of this.ready.splice(0)) this.forget(h);
      await this.pause(backoff);
      backoff = Math.min(10_000, backoff * 2);
    }
    await this.drain();
  }

  // ---- the HTTP source

  private async httpLoop(): Promise<void> {
    const c = this.cfg;
    const heartbeat = setInterval(() => this.heartbeat(), c.heartbeatSeconds * 1000);
    let backoff = 100;
    try {
      while (!this.stopping) {
        const room = c.concurrency + c.prefetch - this.held.size;
        if (room <= 0) {
          await Promise.race([this.nextChange(), this.stopped()]);
          continue;
        }
        let got: ReceivedMessage[];
        try {
          got = await c.client.receive(c.queue, {
            max: Math.min(10, room), waitSeconds: c.waitSeconds, visibilitySeconds: c.leaseSeconds, signal: this.stopCtl.signal,
          });
        } catch (err) {
          if (this.stopping) break;
          c.logger.warn("receive failed", { queue: c.queue, err: errorText(err) });
          await this.pause(backoff);
          backoff = Math.min(10_000, backoff * 2);
          continue;
        }
        backoff = 100;
        this.accept(got.map((m) => fromHTTP(c.queue, m)), undefined);
      }
      await this.drain();
    } finally {
      clearInterval(heartbeat);
    }
  }

  /**
   * Extends the held leases no live stream keeps (every one, over HTTP), 10 receipts a
   * request; an extend refused marks its lease lost.
   */
  private heartbeat(): void {
    const hs = [...this.held.values()].filter((h) => h.state !== "settling" && !h.lost && !h.extending && (!h.stream || h.stream.isEnded));
    for (let i = 0; i < hs.length; i += 10) {
      const chunk = hs.slice(i, i + 10);
      const p = this.cfg.client.extendBatch(this.cfg.queue, chunk.map((h) => h.message.receipt), this.cfg.leaseSeconds)
        .then((results) => {
          results.forEach((r, j) => {
            if (!r.ok) this.loseLease(chunk[j], `the lease could not be extended: ${errorText(r.error)}`);
          });
        })
        .catch((err) => this.cfg.logger.warn("heartbeat failed", { queue: this.cfg.queue, err: errorText(err) }))
        .finally(() => {
          for (const h of chunk) h.extending = undefined;
        });
      for (const h of chunk) h.extending = p;
    }
  }

  // ---- holding and running messages

  private accept(messages: Message[], stream: ConsumerStream | undefined): void {
    for (const message of messages) {
      const h: Held = { message, stream, state: "prefetched", abort: new AbortController(), lost: false };
      if (this.stopping) {
        // Pushed while the credit was being lowered: straight back.
        this.held.set(message.receipt, h);
        this.finish(h, { kind: "release" });
        continue;
      }
      this.held.set(message.receipt, h);
      if (stream) {
        // Past the stream's maximum hold the broker lets the lease end.
        h.holdTimer = setTimeout(() => this.loseLease(h, "the message reached the stream's maximum hold"), stream.maxHoldSeconds * 1000);
        h.holdTimer.unref();
      }
      this.ready.push(h);
    }
    this.dispatch();
  }

  private dispatch(): void {
    while (!this.stopping && this.running < this.cfg.concurrency && this.ready.length > 0) {
      void this.runOne(this.ready.shift()!);
    }
  }

  private loseLease(h: Held, why: string): void {
    if (h.lost || h.state === "settling") return;
    h.lost = true;
    this.cfg.logger.warn("lease lost", { queue: this.cfg.queue, messageId: h.message.id, why });
    if (h.state === "prefetched") {
      const i = this.ready.indexOf(h);
      if (i >= 0) this.ready.splice(i, 1);
      this.forget(h);
    } else {
      h.abort.abort(new LeaseLostError(`the lease of message ${h.message.id} was lost: ${why}`));
    }
  }

  private async runOne(h: Held): Promise<void> {
    this.running++;
    h.state = "running";
    const start = performance.now();
    let thrown: unknown;
    let failed = false;
    try {
      await withTraceParent(h.message.traceContext, () => this.cfg.handler(h.message, { signal: h.abort.signal }));
    } catch (err) {
      thrown = err;
      failed = true;
    }
    const ms = performance.now() - start;
    try {
      if (failed) {
        this.failed++;
        this.cfg.onFailed?.(h.message, thrown, ms);
      } else {
        this.handled++;
        this.cfg.onHandled?.(h.message, ms);
      }
    } catch (err) {
      this.cfg.logger.error("a hook threw", { queue: this.cfg.queue, err: errorText(err) });
    }
    this.running--;
    if (h.lost) {
      this.forget(h);
    } else {
      const outcome = outcomeOf(thrown, failed, this.interrupted);
      if (outcome.kind === "nack") {
        this.cfg.logger.warn("handler failed", { queue: this.cfg.queue, messageId: h.message.id, reason: outcome.reason });
      }
      this.finish(h, outcome);
    }
    this.dispatch();
  }

  /** Drops a message the pool no longer holds without an outcome (its lease is gone). */
  private forget(h: Held): void {
    clearTimeout(h.holdTimer);
    h.state = "settling";
    this.held.delete(h.message.receipt);
    this.wake();
  }

  /** Applies an outcome, then lets go of the message. */
  private finish(h: Held, outcome: Outcome): void {
    clearTimeout(h.holdTimer);
    h.state = "settling";
    const p = this.apply(h, outcome)
      .catch((err) => this.cfg.logger.error("could not apply an outcome: the message comes back when its lease ends", {
        queue: this.cfg.queue, messageId: h.message.id, outcome: outcome.kind, err: errorText(err),
      }))
      .finally(() => {
        this.applying.delete(p);
        this.held.delete(h.message.receipt);
        this.wake();
      });
    this.applying.add(p);
  }

  private async apply(h: Held, outcome: Outcome): Promise<void> {
    // The heartbeat and the outcome never cross: a late extend never follows an ack.
    await h.extending;
    const receipt = h.message.receipt;
    const s: Settlement =
      outcome.kind === "ack" ? { receipt, ack: true }
        : outcome.kind === "nack" ? { receipt, nack: { reason: outcome.reason, delaySeconds: outcome.delaySeconds } }
          : outcome.kind === "snooze" ? { receipt, snooze: { seconds: outcome.delaySeconds } }
            : outcome.kind === "deadLetter" ? { receipt, deadLetter: { reason: outcome.reason } }
              : { receipt, release: true };
    if (h.stream && !h.stream.isEnded) {
      try {
        await this.settleOnStream(h, s);
        return;
      } catch (err) {
        // The stream ended before its answer: the native API takes the receipt (a broker
        // that restarted left the lease running; one that stayed up handed the message
        // back, and the receipt is stale).
        if (!h.stream.isEnded) throw err;
      }
    }
    const o = { signal: AbortSignal.timeout(OUTCOME_TIMEOUT_MS) };
    const c = this.cfg.client;
    const q = this.cfg.queue;
    switch (outcome.kind) {
      case "ack": return c.ack(q, receipt, o);
      case "nack": return c.nack(q, receipt, { reason: outcome.reason, delaySeconds: outcome.delaySeconds }, o);
      case "snooze": return c.snooze(q, receipt, outcome.delaySeconds, o);
      case "deadLetter": return c.deadLetter(q, receipt, outcome.reason, o);
      case "release": return c.release(q, receipt, o);
    }
  }

  /** Settles on the message's stream, batched with the other outcomes of this turn. */
  private settleOnStream(h: Held, s: Settlement): Promise<void> {
    return new Promise((resolve, reject) => {
      this.batch.push({ s, h, resolve, reject });
      if (this.batchScheduled) return;
      this.batchScheduled = true;
      setImmediate(() => this.flushSettlements());
    });
  }

  private flushSettlements(): void {
    this.batchScheduled = false;
    const byStream = new Map<ConsumerStream, PendingSettlement[]>();
    for (const e of this.batch.splice(0)) {
      const list = byStream.get(e.h.stream!) ?? [];
      list.push(e);
      byStream.set(e.h.stream!, list);
    }
    for (const [stream, list] of byStream) {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error("sluice: no answer to a settlement within 10 s")), OUTCOME_TIMEOUT_MS);
      });
      Promise.race([stream.settle(list.map((e) => e.s)), timeout]).then((results) => {
        results.forEach((r, i) => {
          if (r.error) {
            this.cfg.logger.warn("settlement refused", { queue: this.cfg.queue, messageId: list[i].h.message.id, err: r.error.message });
          }
          list[i].resolve();
        });
      }, (err: Error) => {
        for (const e of list) e.reject(err);
      }).finally(() => clearTimeout(timer));
    }
  }

  /** An empty settle's answer, or its time limit, or the stream's end. */
  private async roundTrip(stream: ConsumerStream): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<void>((r) => (timer = setTimeout(r, OUTCOME_TIMEOUT_MS)));
    try {
      await Promise.race([stream.settle([]).then(() => {}, () => {}), limit]);
    } finally {
      clearTimeout(timer);
    }
  }

  private stopped(): Promise<void> {
    const s = this.stopCtl.signal;
    return s.aborted ? Promise.resolve() : new Promise((r) => s.addEventListener("abort", () => r(), { once: true }));
  }

  private async pause(ms: number): Promise<void> {
    await sleep(Math.random() * ms + ms / 2, this.stopCtl.signal).catch(() => {});
  }

  /**
   * Waits for the running handlers (up to the grace, then aborts them) and for every
   * outcome being applied.
   */
  private async drain(): Promise<void> {
    const grace = setTimeout(() => {
      this.interrupted = true;
      for (const h of this.held.values()) {
        if (h.state === "running") h.abort.abort(new ShutdownError());
      }
      this.wake();
    }, this.cfg.shutdownTimeoutMs);
    try {
      while (this.running > 0 || this.applying.size > 0) {
        await Promise.race([this.nextChange(), ...this.applying]);
      }
    } finally {
      clearTimeout(grace);
    }
  }
}

function fromStream(queue: string, m: StreamMessage): Message {
  return {
    queue, id: m.id, body: m.body, attributes: m.attributes, priority: m.priority, attempts: m.attempts,
    receiveCount: m.receiveCount, maxAttempts: m.maxAttempts, sentAt: m.sentAt, correlationId: m.correlationId,
    traceContext: m.traceContext, groupId: m.groupId, failureReason: m.failureReason, receipt: m.receipt,
  };
}

function fromHTTP(queue: string, m: ReceivedMessage): Message {
  return {
    queue, id: m.id, body: m.body, attributes: m.attributes, priority: m.priority, attempts: m.attempts,
    receiveCount: m.receiveCount, maxAttempts: m.maxAttempts, sentAt: new Date(m.createdAt),
    correlationId: m.correlationId ?? "", traceContext: m.traceContext ?? "", groupId: m.groupId ?? "",
    failureReason: m.failureReason ?? "", receipt: m.receipt,
  };
}
