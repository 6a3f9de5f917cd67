/**
 * The client of Sluice's native JSON API (`/v1/`), on Node's own `fetch`.
 *
 * @packageDocumentation
 */

import { SluiceError } from "./errors.js";
import { traceParent } from "./trace.js";

/** A message attribute: `String`, `Number` or `Binary` (optionally `.label`), and its value (base64 for a Binary). */
export interface Attribute {
  type: string;
  value: string;
}

/** A String attribute. */
export function stringAttr(value: string): Attribute {
  return { type: "String", value };
}

/** A Number attribute. */
export function numberAttr(value: number | string): Attribute {
  return { type: "Number", value: String(value) };
}

/**
 * A message to send: the native API's envelope. Only `body` is required; the broker's
 * docs/api.md (Send) gives every field's range.
 */
export interface OutgoingMessage {
  /** The body: 1 byte up to the queue's MaximumMessageSize (text). */
  body: string;
  /** User message attributes by name, at most 10 (`IdempotencyKey` names the idempotency key). */
  attributes?: Record<string, Attribute>;
  /** -100..100: higher is served first (standard queues). */
  priority?: number;
  /** 1..1000: overrides the queue's maxReceiveCount for this message. */
  maxAttempts?: number;
  /** The message's time to live, 1..1209600 seconds. */
  ttlSeconds?: number;
  /** Up to 128 bytes, kept through the dead-letter queue and a replay. */
  correlationId?: string;
  /**
   * A W3C traceparent (`00-<trace id>-<span id>-<flags>`). Unset: inside a worker's handler,
   * the handled message's ({@link traceParent}).
   */
  traceContext?: string;
  /** Seconds before the message is visible (standard queues: up to the retention period). */
  delaySeconds?: number;
  /** When it becomes visible instead of `delaySeconds`. */
  deliverAt?: Date;
  /** A FIFO queue's message group (required there); a standard queue's tenant. */
  groupId?: string;
  /** The deduplication id: FIFO's, or on a standard queue an idempotency key for the send. */
  dedupId?: string;
}

/** A message as the broker keeps it, with its lease's receipt when it was received. */
export interface ReceivedMessage {
  id: string;
  body: string;
  attributes: Record<string, Attribute>;
  priority: number;
  /** Sluice's attempts, this delivery included: a receive adds one, a snooze gives it back. */
  attempts: number;
  /** SQS's ApproximateReceiveCount: every delivery. */
  receiveCount: number;
  /** Its attempt limit (its own, else the queue's maxReceiveCount); 0 when none. */
  maxAttempts: number;
  ttlSeconds?: number;
  createdAt: string;
  firstReceivedAt?: string;
  lastReceivedAt?: string;
  correlationId?: string;
  traceContext?: string;
  groupId?: string;
  dedupId?: string;
  sequenceNumber?: string;
  /** What settles its lease (absent on a browsed message). */
  receipt: string;
  /** A dead letter's source queue. */
  deadLetterSource?: string;
  /** The reason of its latest failure (a nack's, `lease expired`, ...). */
  failureReason?: string;
}

/** A queue: its name, ARN, settings and tags. */
export interface Queue {
  name: string;
  arn: string;
  fifo: boolean;
  deadLetterQueue?: string;
  createdAt: string;
  modifiedAt: string;
  attributes: Record<string, string>;
  tags: Record<string, string>;
}

/** A queue's counts (docs/api.md, Stats). */
export interface Stats {
  visible: number;
  inFlight: number;
  delayed: number;
  depth: number;
  oldestAgeSeconds: number;
  oldestVisibleAgeSeconds: number;
  /** The messages in its dead-letter queue; null when it has none. */
  deadLetters: number | null;
}

/** One failure of a message: why, and when (RFC 3339). */
export interface Failure {
  reason: string;
  at: string;
}

/**
 * What became of a message, by its id (docs/api.md, Job status). Fields that do not apply to
 * its state are absent; times are RFC 3339.
 */
export interface MessageStatus {
  id: string;
  queue: string;
  state: "delayed" | "ready" | "inFlight" | "backingOff" | "deadLettered" | "completed" | "expired" | "replayed";
  attempts: number;
  receiveCount?: number;
  visibleAt?: string;
  leaseEndsAt?: string;
  deadLetterQueue?: string;
  deadLetterSource?: string;
  /** The last failure's reason. */
  reason?: string;
  /** The last 10 failures, oldest first. */
  failures?: Failure[];
  /** How many failures it had in all. */
  failureCount?: number;
  completedAt?: string;
  /** The result its ack carried (completed only). */
  result?: string;
  expiredAt?: string;
  /** A replayed dead letter's new id. */
  replayedAs?: string;
}

/** The answer to a send: the message's id (the first one's for a duplicate). */
export interface SendResult {
  id: string;
  sequenceNumber?: string;
}

/** One entry's result in a batch answer. */
export interface BatchResult {
  id?: string;
  ok: boolean;
  messageId?: string;
  sequenceNumber?: string;
  error?: SluiceError;
}

/** A page of browsed messages; `next` is the cursor of the following page. */
export interface Page {
  messages: ReceivedMessage[];
  next?: string;
}

/** Options of {@link Client}. */
export interface ClientOptions {
  /** The access key as `ACCESS_KEY_ID:SECRET`, sent as `Authorization: Bearer ...`. */
  token?: string;
  /** Retries of a request the broker refused for now or could not be reached for (default 3). */
  retries?: number;
  /** The first retry's wait in milliseconds, doubling up to `maxBackoffMs` with full jitter (default 100). */
  minBackoffMs?: number;
  /** The longest wait between retries in milliseconds (default 5000). */
  maxBackoffMs?: number;
  /** Each request's own time limit in milliseconds, beyond a receive's wait (default 30000). */
  timeoutMs?: number;
}

/** Per-call options: an AbortSignal that cancels the call, its retries included. */
export interface CallOptions {
  signal?: AbortSignal;
}

/** Options of {@link Client.receive}. */
export interface ReceiveOptions extends CallOptions {
  /** 1..10 messages (default 1). */
  max?: number;
  /** 0..20 seconds to wait for a first message (default the queue's). */
  waitSeconds?: number;
  /** The lease, 0..43200 seconds (default the queue's VisibilityTimeout). */
  visibilitySeconds?: number;
}

interface Request {
  method: string;
  path: string;
  body?: unknown;
  query?: Record<string, string | undefined>;
  /** Safe to repeat after an answer that may have come after the work was done. */
  idempotent: boolean;
  /** Extra time the broker may take to answer (a receive's wait). */
  extraMs?: number;
  signal?: AbortSignal;
}

/**
 * A client for one broker's native API. Share it: it holds no connection of its own (Node's
 * fetch keeps them).
 *
 * Retries: a 429, or the broker's own 503 (`unavailable`, `store_full`), means the broker did
 * nothing, and a refused connection means nothing was sent: every request is retried then
 * (`Retry-After` honoured). Other failures (a broken connection, a 500, a proxy's 5xx) may
 * come after the work was done: only requests safe to repeat are retried then (reads,
 * creates, receive, ack, extend, and a send whose messages all carry a `dedupId`).
 */
export class Client {
  /** The broker's base URL, e.g. `http://127.0.0.1:9324`, without a trailing slash. */
  readonly baseURL: string;
  /** The bearer token, when the broker has keys. */
  readonly token: string | undefined;
  private readonly retries: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly timeoutMs: number;

  constructor(baseURL: string, options: ClientOptions = {}) {
    const u = new URL(baseURL);
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new TypeError(`sluice: base URL ${baseURL}: use http:// or https://`);
    }
    this.baseURL = baseURL.replace(/\/+$/, "");
    this.token = options.token;
    this.retries = options.retries ?? 3;
    this.minBackoffMs = options.minBackoffMs ?? 100;
    this.maxBackoffMs = options.maxBackoffMs ?? 5000;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  // ---- queues

  /** Creates a queue, or answers the existing one when every given attribute has its value. */
  async createQueue(name: string, attributes?: Record<string, string>, tags?: Record<string, string>, o: CallOptions = {}): Promise<Queue> {
    return (await this.do({ method: "POST", path: "/v1/queues", body: { name, attributes, tags }, idempotent: true, signal: o.signal })) as Queue;
  }

  /** Answers a queue's settings. */
  async getQueue(name: string, o: CallOptions = {}): Promise<Queue> {
    return (await this.do({ method: "GET", path: queuePath(name), idempotent: true, signal: o.signal })) as Queue;
  }

  /** Deletes a queue. */
  async deleteQueue(name: string, o: CallOptions = {}): Promise<void> {
    await this.do({ method: "DELETE", path: queuePath(name), idempotent: false, signal: o.signal });
  }

  /** Deletes every message of a queue. */
  async purgeQueue(name: string, o: CallOptions = {}): Promise<void> {
    await this.do({ method: "POST", path: queuePath(name, "purge"), idempotent: false, signal: o.signal });
  }

  /** Answers a queue's counts. */
  async stats(name: string, o: CallOptions = {}): Promise<Stats> {
    return (await this.do({ method: "GET", path: queuePath(name, "stats"), idempotent: true, signal: o.signal })) as Stats;
  }

  // ---- messages

  /** Sends one message; it answers once the message is durable. */
  async send(queue: string, m: OutgoingMessage, o: CallOptions = {}): Promise<SendResult> {
    return (await this.do({ method: "POST", path: queuePath(queue, "messages"), body: envelope(m), idempotent: m.dedupId !== undefined, signal: o.signal })) as SendResult;
  }

  /** Sends up to 10 messages as one batch; each entry succeeds or fails on its own. */
  async sendBatch(queue: string, messages: OutgoingMessage[], o: CallOptions = {}): Promise<BatchResult[]> {
    const body = { messages: messages.map((m) => envelope(m)) };
    const out = (await this.do({
      method: "POST", path: queuePath(queue, "messages", "batch"), body,
      idempotent: messages.every((m) => m.dedupId !== undefined), signal: o.signal,
    })) as { results: WireBatchResult[] };
    return out.results.map(batchResult);
  }

  /** Leases up to `max` messages, waiting up to `waitSeconds` for a first one. */
  async receive(queue: string, o: ReceiveOptions = {}): Promise<ReceivedMessage[]> {
    const body = { max: o.max, waitSeconds: o.waitSeconds, visibilitySeconds: o.visibilitySeconds };
    const out = (await this.do({
      method: "POST", path: queuePath(queue, "receive"), body, idempotent: true,
      extraMs: (o.waitSeconds ?? 20) * 1000, signal: o.signal,
    })) as { messages: WireMessage[] };
    return out.messages.map(fromWire);
  }

  /** Pages through a queue's messages without receiving them. */
  async browse(queue: string, query: BrowseQuery = {}, o: CallOptions = {}): Promise<Page> {
    const out = (await this.do({ method: "GET", path: queuePath(queue, "messages"), query: browseQuery(query), idempotent: true, signal: o.signal })) as { messages: WireMessage[]; next?: string };
    return { messages: out.messages.map(fromWire), next: out.next || undefined };
  }

  /** Pages through the dead letters that came from `queue` (it needs a RedrivePolicy). */
  async deadLetters(queue: string, query: BrowseQuery = {}, o: CallOptions = {}): Promise<Page> {
    const out = (await this.do({ method: "GET", path: queuePath(queue, "dead-letters"), query: browseQuery(query), idempotent: true, signal: o.signal })) as { messages: WireMessage[]; next?: string };
    return { messages: out.messages.map(fromWire), next: out.next || undefined };
  }

  /**
   * What became of a message, by its id; null when the queue knows no such message (one that
   * left it is kept only while its CompletedRetentionSeconds lasts).
   */
  async messageStatus(queue: string, id: string, o: CallOptions = {}): Promise<MessageStatus | null> {
    try {
      return (await this.do({ method: "GET", path: queuePath(queue, "messages", encodeURIComponent(id)), idempotent: true, signal: o.signal })) as MessageStatus;
    } catch (err) {
      if (err instanceof SluiceError && err.code === "message_not_found") return null;
      throw err;
    }
  }

  // ---- consumer controls

  /**
   * The work is done: the message is deleted (an ack of a stale receipt does nothing). A
   * `result` (at most 64 KiB) is kept with its completed status while its queue keeps records
   * (CompletedRetentionSeconds).
   */
  async ack(queue: string, receipt: string, o: CallOptions & { result?: string } = {}): Promise<void> {
    await this.control(queue, "ack", { receipt, result: o.result }, true, o);
  }

  /** Hands the message back as a failed attempt, with a reason and an optional delay (0..43200 s). */
  async nack(queue: string, receipt: string, n: { reason?: string; delaySeconds?: number } = {}, o: CallOptions = {}): Promise<void> {
    await this.control(queue, "nack", { receipt, reason: n.reason, delaySeconds: n.delaySeconds }, false, o);
  }

  /** Hands the message back after `delaySeconds`, the attempt not counted. */
  async snooze(queue: string, receipt: string, delaySeconds: number, o: CallOptions = {}): Promise<void> {
    await this.control(queue, "snooze", { receipt, delaySeconds }, false, o);
  }

  /** Hands the message back at once, the attempt not counted. */
  async release(queue: string, receipt: string, o: CallOptions = {}): Promise<void> {
    await this.control(queue, "release", { receipt }, false, o);
  }

  /** Moves the message to the queue's dead-letter queue now, with a reason. */
  async deadLetter(queue: string, receipt: string, reason?: string, o: CallOptions = {}): Promise<void> {
    await this.control(queue, "dead-letter", { receipt, reason }, false, o);
  }

  /** Sets the message's lease to end `visibilitySeconds` (1..43200) from now. */
  async extend(queue: string, receipt: string, visibilitySeconds: number, o: CallOptions = {}): Promise<void> {
    await this.control(queue, "extend", { receipt, visibilitySeconds }, true, o);
  }

  /**
   * Extends up to 10 leases at once; answers each entry's result in order (an entry's
   * `error` says why its lease was not extended).
   */
  async extendBatch(queue: string, receipts: string[], visibilitySeconds: number, o: CallOptions = {}): Promise<BatchResult[]> {
    const entries = receipts.map((receipt) => ({ receipt, visibilitySeconds }));
    const out = (await this.do({ method: "POST", path: queuePath(queue, "extend"), body: { entries }, idempotent: true, signal: o.signal })) as { results: WireBatchResult[] };
    return out.results.map(batchResult);
  }

  private async control(queue: string, action: string, body: Record<string, unknown>, idempotent: boolean, o: CallOptions): Promise<void> {
    await this.do({ method: "POST", path: queuePath(queue, action), body, idempotent, signal: o.signal });
  }

  // ---- the transport

  private async do(r: Request): Promise<unknown> {
    let url = this.baseURL + r.path;
    if (r.query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(r.query)) if (v !== undefined) q.set(k, v);
      const s = q.toString();
      if (s) url += "?" + s;
    }
    const headers: Record<string, string> = { Accept: "application/json" };
    let body: string | undefined;
    if (r.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(r.body);
    }
    if (this.token) headers["Authorization"] = `Bearer ${this.token}`;
    for (let attempt = 0; ; attempt++) {
      r.signal?.throwIfAborted();
      const timeout = AbortSignal.timeout(this.timeoutMs + (r.extraMs ?? 0));
      const signal = r.signal ? AbortSignal.any([r.signal, timeout]) : timeout;
      let res: Response;
      try {
        res = await fetch(url, { method: r.method, headers, body, signal });
      } catch (err) {
        r.signal?.throwIfAborted();
        // A refused connection sent nothing: always safe to retry. Any other failure
        // (reset, timeout) may have come after the work.
        const retryable = connectionRefused(err) || r.idempotent;
        if (!retryable || attempt >= this.retries) throw err;
        await this.backoff(attempt, undefined, r.signal);
        continue;
      }
      const text = await res.text();
      if (res.ok) return text === "" ? undefined : JSON.parse(text);
      const err = toError(res, text);
      // The broker's 429 and its own JSON 503 say nothing was done.
      const nothingDone = res.status === 429 || (res.status === 503 && err.code !== "");
      const ambiguous = res.status >= 500 && !nothingDone;
      if ((nothingDone || (ambiguous && r.idempotent)) && attempt < this.retries) {
        await this.backoff(attempt, err.retryAfterSeconds, r.signal);
        continue;
      }
      throw err;
    }
  }

  private async backoff(attempt: number, retryAfterSeconds: number | undefined, signal?: AbortSignal): Promise<void> {
    const cap = Math.min(this.maxBackoffMs, this.minBackoffMs * 2 ** attempt);
    let ms = Math.random() * cap;
    if (retryAfterSeconds !== undefined) ms = Math.max(ms, retryAfterSeconds * 1000);
    await sleep(ms, signal);
  }
}

/** The query of a browse (docs/api.md, Browse). */
export interface BrowseQuery {
  limit?: number;
  cursor?: string;
  order?: "oldest" | "newest";
  attribute?: string;
  value?: string;
  reason?: string;
}

function browseQuery(q: BrowseQuery): Record<string, string | undefined> {
  return {
    limit: q.limit === undefined ? undefined : String(q.limit), cursor: q.cursor, order: q.order,
    attribute: q.attribute, value: q.value, reason: q.reason,
  };
}

/** Resolves after ms, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function queuePath(queue: string, ...rest: string[]): string {
  return ["/v1/queues", encodeURIComponent(queue), ...rest].join("/");
}

function connectionRefused(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    if ((e as { code?: string }).code === "ECONNREFUSED") return true;
  }
  return false;
}

function toError(res: Response, text: string): SluiceError {
  let code = "";
  let message = text.slice(0, 512) || res.statusText;
  try {
    const j = JSON.parse(text) as { code?: unknown; message?: unknown };
    if (typeof j.code === "string") {
      code = j.code;
      message = typeof j.message === "string" ? j.message : "";
    }
  } catch {
    // not the broker's JSON (a proxy's page): code stays ""
  }
  const ra = res.headers.get("Retry-After");
  const retryAfter = ra !== null && /^\d+$/.test(ra) ? Number(ra) : undefined;
  return new SluiceError(res.status, code, message, retryAfter);
}

function envelope(m: OutgoingMessage): Record<string, unknown> {
  const { deliverAt, ...rest } = m;
  // Inside a handler, the message it handles passes its trace context on.
  const traceContext = m.traceContext ?? traceParent();
  return { ...rest, traceContext, deliverAt: deliverAt?.toISOString() };
}

interface WireBatchResult {
  id?: string;
  ok: boolean;
  messageId?: string;
  sequenceNumber?: string;
  error?: { code: string; message: string };
}

function batchResult(r: WireBatchResult): BatchResult {
  return {
    id: r.id, ok: r.ok, messageId: r.messageId, sequenceNumber: r.sequenceNumber,
    error: r.error ? new SluiceError(0, r.error.code, r.error.message) : undefined,
  };
}

type WireMessage = Omit<ReceivedMessage, "priority" | "maxAttempts" | "attributes" | "receipt"> & {
  priority?: number;
  maxAttempts?: number;
  attributes?: Record<string, Attribute>;
  receipt?: string;
};

function fromWire(w: WireMessage): ReceivedMessage {
  return { ...w, attributes: w.attributes ?? {}, priority: w.priority ?? 0, maxAttempts: w.maxAttempts ?? 0, receipt: w.receipt ?? "" };
}
