/**
 * The stream API's client (the broker's docs/streams.md): a consumer stream (`Consume`) and a
 * producer stream (`Publish`) over gRPC, with `@grpc/grpc-js` and the package's copy of the
 * broker's `stream.proto` loaded at run time by `@grpc/proto-loader`.
 *
 * @packageDocumentation
 */

import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { fileURLToPath } from "node:url";

import type { Attribute, Client, OutgoingMessage, SendResult } from "./client.js";
import { SluiceError } from "./errors.js";
import { traceParent } from "./trace.js";

/** The path of the package's copy of the broker's `stream.proto`. */
export const protoPath = fileURLToPath(new URL("../../proto/stream.proto", import.meta.url));

type StreamsClient = grpc.Client & {
  Consume(metadata: grpc.Metadata): grpc.ClientDuplexStream<unknown, WireResponse>;
  Publish(metadata: grpc.Metadata): grpc.ClientDuplexStream<unknown, WirePublishConfirm>;
};
type StreamsCtor = new (address: string, creds: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => StreamsClient;

let streamsCtor: StreamsCtor | undefined;

function loadStreams(): StreamsCtor {
  if (!streamsCtor) {
    const def = protoLoader.loadSync(protoPath, { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true });
    const pkg = grpc.loadPackageDefinition(def) as unknown as { sluice: { stream: { v1: { Streams: StreamsCtor } } } };
    streamsCtor = pkg.sluice.stream.v1.Streams;
  }
  return streamsCtor;
}

/**
 * Opens a gRPC channel to the broker behind `client`: the same host and port as its HTTP
 * APIs, plaintext HTTP/2 for `http://`, TLS for `https://`. Close it with `.close()`.
 */
function connect(client: Client): StreamsClient {
  const u = new URL(client.baseURL);
  const port = u.port || (u.protocol === "https:" ? "443" : "80");
  const creds = u.protocol === "https:" ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
  const Streams = loadStreams();
  // Keep-alive pings notice a broker that went away without closing; the broker allows one
  // every 5 s at most, so 20 s stays clear of its too_many_pings.
  return new Streams(`${u.hostname}:${port}`, creds, {
    "grpc.keepalive_time_ms": 20_000,
    "grpc.keepalive_timeout_ms": 10_000,
    "grpc.max_receive_message_length": 8 * 1024 * 1024,
  });
}

function metadata(client: Client): grpc.Metadata {
  const md = new grpc.Metadata();
  if (client.token) md.set("authorization", `Bearer ${client.token}`);
  return md;
}

/** A message delivered on a consumer stream, with its lease's receipt. */
export interface StreamMessage {
  id: string;
  body: string;
  attributes: Record<string, Attribute>;
  priority: number;
  attempts: number;
  receiveCount: number;
  maxAttempts: number;
  sentAt: Date;
  correlationId: string;
  traceContext: string;
  groupId: string;
  dedupId: string;
  sequenceNumber: string;
  failureReason: string;
  receipt: string;
  ttlSeconds: number;
}

/** What to do with one delivered message, named by its receipt: exactly one action. */
export type Settlement =
  | { receipt: string; ack: true }
  | { receipt: string; nack: { reason?: string; delaySeconds?: number } }
  | { receipt: string; extend: { seconds: number } }
  | { receipt: string; snooze: { seconds: number } }
  | { receipt: string; release: true }
  | { receipt: string; deadLetter: { reason?: string } };

/** One settlement's outcome: `error` says why it was not applied. */
export interface SettleResult {
  receipt: string;
  error?: SluiceError;
}

/** Options of {@link ConsumerStream.open}. */
export interface ConsumeOptions {
  /** How many unsettled messages the stream may hold (its prefetch), 0..10000; 0 opens it paused. */
  credit: number;
  /** Each delivery's lease, 1..43200 seconds (0 or unset: the queue's VisibilityTimeout). */
  leaseSeconds?: number;
  /** How long the broker keeps extending one message's lease, 1..43200 s (default 3600). */
  maxHoldSeconds?: number;
  /** The consumer's name in the queue's consumer list. */
  clientName?: string;
  /** Called with each batch of pushed messages, and the stream they came on. */
  onMessages: (messages: StreamMessage[], stream: ConsumerStream) => void;
  /** Called once when the stream ends: undefined after {@link ConsumerStream.close}, else why. */
  onEnd?: (err: Error | undefined) => void;
}

interface WireAttribute { type: string; stringValue: string; binaryValue: Buffer }
interface WireMessage {
  id: string; body: string; attributes: Record<string, WireAttribute>; priority: number; attempts: number;
  receiveCount: number; maxAttempts: number; sentAtUnixMs: number; correlationId: string; traceContext: string;
  groupId: string; dedupId: string; sequenceNumber: string; failureReason: string; receipt: string; ttlSeconds: number;
}
interface WireError { code: string; message: string }
interface WireResponse {
  kind: "opened" | "deliveries" | "settled";
  opened?: { streamId: string; leaseSeconds: number; maxHoldSeconds: number };
  deliveries?: { messages: WireMessage[] };
  settled?: { seq: number; results: { receipt: string; error?: WireError | null }[] };
}
interface WirePublishConfirm {
  seq: number;
  results: { messageId: string; sequenceNumber: string; error?: WireError | null }[];
  error?: WireError | null;
}

/**
 * A consumer stream on one queue: the broker pushes leased messages while the stream holds
 * fewer than its credit, keeps their leases alive while the stream lives (up to its maximum
 * hold), and takes settlements in batches. When the stream ends, the broker hands back what
 * it still holds at once (as failed attempts, reason `consumer disconnected`; what it had not
 * begun to send goes back uncounted).
 */
export class ConsumerStream {
  /** The stream's id in the queue's consumer list. */
  readonly streamId: string;
  /** The lease in force for each delivery, in seconds. */
  readonly leaseSeconds: number;
  /** The maximum hold in force, in seconds. */
  readonly maxHoldSeconds: number;
  private seq = 0;
  private readonly pending = new Map<number, (r: SettleResult[]) => void>();
  private ended = false;
  private endErr: Error | undefined;
  private closing = false;
  private readonly endWaiters: (() => void)[] = [];

  private constructor(
    private readonly channel: StreamsClient,
    private readonly call: grpc.ClientDuplexStream<unknown, WireResponse>,
    opened: NonNullable<WireResponse["opened"]>,
  ) {
    this.streamId = opened.streamId;
    this.leaseSeconds = opened.leaseSeconds;
    this.maxHoldSeconds = opened.maxHoldSeconds;
  }

  /** Opens a consumer stream on `queue` and resolves once the broker answered its Open. */
  static open(client: Client, queue: string, o: ConsumeOptions): Promise<ConsumerStream> {
    const channel = connect(client);
    const call = channel.Consume(metadata(client));
    return new Promise((resolve, reject) => {
      let stream: ConsumerStream | undefined;
      const finish = (err: Error | undefined) => {
        if (!stream) {
          channel.close();
          reject(err ?? new Error("sluice: the consumer stream ended before it opened"));
          return;
        }
        stream.end(err);
        o.onEnd?.(stream.closing && isCancelOrOK(err) ? undefined : stream.endErr);
      };
      call.on("data", (r: WireResponse) => {
        if (r.kind === "opened" && r.opened && !stream) {
          stream = new ConsumerStream(channel, call, r.opened);
          resolve(stream);
        } else if (r.kind === "deliveries" && r.deliveries && stream) {
          o.onMessages(r.deliveries.messages.map(fromWire), stream);
        } else if (r.kind === "settled" && r.settled && stream) {
          const done = stream.pending.get(r.settled.seq);
          stream.pending.delete(r.settled.seq);
          done?.(r.settled.results.map((x) => ({
            receipt: x.receipt,
            error: x.error ? new SluiceError(0, x.error.code, x.error.message) : undefined,
          })));
        }
      });
      let done = false;
      const once = (err: Error | undefined) => {
        if (!done) {
          done = true;
          finish(err);
        }
      };
      call.on("error", (err: Error) => once(streamError(err)));
      call.on("end", () => once(undefined));
      call.write({
        open: {
          queue, credit: o.credit, leaseSeconds: o.leaseSeconds ?? 0, maxHoldSeconds: o.maxHoldSeconds ?? 0,
          clientName: o.clientName ?? "",
        },
      });
    });
  }

  /** Whether the stream has ended. */
  get isEnded(): boolean {
    return this.ended;
  }

  /** Changes the stream's credit (0 pauses deliveries). */
  setCredit(credit: number): void {
    if (!this.ended) this.call.write({ credit: { credit } });
  }

  /**
   * Sends a batch of settlements and resolves with each one's result once the broker made
   * them durable. Rejects when the stream ends first (the settlements' fate is then unknown;
   * what the stream held went back to the queue if the broker stayed up).
   */
  settle(settlements: Settlement[]): Promise<SettleResult[]> {
    if (this.ended) return Promise.reject(this.endErr ?? new Error("sluice: the consumer stream has ended"));
    const seq = ++this.seq;
    return new Promise((resolve, reject) => {
      this.pending.set(seq, resolve);
      this.endWaiters.push(() => {
        if (this.pending.delete(seq)) reject(this.endErr ?? new Error("sluice: the consumer stream ended"));
      });
      this.call.write({ settle: { seq, settlements: settlements.map(toWireSettlement) } });
    });
  }

  /**
   * Ends the stream: closes the sending side and resolves once the broker ended it. What
   * the stream still holds goes back to the queue. `cancel` cuts it at once instead.
   */
  close(cancel = false): Promise<void> {
    this.closing = true;
    if (this.ended) return Promise.resolve();
    return new Promise((resolve) => {
      this.endWaiters.push(resolve);
      if (cancel) this.call.cancel();
      else this.call.end();
    });
  }

  private end(err: Error | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.endErr = err ?? (this.closing ? undefined : new Error("sluice: the broker ended the consumer stream"));
    this.channel.close();
    for (const w of this.endWaiters.splice(0)) w();
  }
}

/**
 * The error a stream ended with, as a {@link SluiceError} when the broker's gRPC status
 * carries a google.rpc.ErrorInfo detail of domain "sluice" (its reason is the native API's
 * code: `queue_not_found`, `unavailable`, ...); any other error as it is.
 */
export function streamError(err: Error): Error {
  const details = (err as { metadata?: grpc.Metadata }).metadata?.get("grpc-status-details-bin")?.[0];
  if (!Buffer.isBuffer(details)) return err;
  try {
    // google.rpc.Status: 3 = repeated Any details; Any: 1 = type_url, 2 = value;
    // google.rpc.ErrorInfo: 1 = reason, 2 = domain.
    for (const [f, any] of fields(details)) {
      if (f !== 3 || !Buffer.isBuffer(any)) continue;
      const a = new Map(fields(any));
      const typeURL = a.get(1);
      const value = a.get(2);
      if (!Buffer.isBuffer(typeURL) || !typeURL.toString().endsWith("/google.rpc.ErrorInfo") || !Buffer.isBuffer(value)) continue;
      const info = new Map(fields(value));
      const reason = info.get(1);
      const domain = info.get(2);
      if (Buffer.isBuffer(reason) && Buffer.isBuffer(domain) && domain.toString() === "sluice") {
        const e = new SluiceError(0, reason.toString(), (err as { details?: string }).details ?? err.message);
        (e as { cause?: unknown }).cause = err;
        return e;
      }
    }
  } catch {
    // a malformed detail: the gRPC error as it is
  }
  return err;
}

/** The fields of a protobuf message: [field number, bytes (length-delimited) or number (varint)]; others skipped. */
function* fields(buf: Buffer): Generator<[number, Buffer | number]> {
  let i = 0;
  const varint = (): number => {
    let v = 0;
    let mul = 1;
    for (;;) {
      if (i >= buf.length) throw new RangeError("truncated varint");
      const b = buf[i++];
      v += (b & 0x7f) * mul;
      if (b < 0x80) return v;
      mul *= 128;
      if (mul > 2 ** 63) throw new RangeError("varint too long");
    }
  };
  while (i < buf.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    switch (key & 7) {
      case 0: yield [field, varint()]; break;
      case 1: i += 8; break;
      case 2: {
        const n = varint();
        if (i + n > buf.length) throw new RangeError("truncated field");
        yield [field, buf.subarray(i, i + n)];
        i += n;
        break;
      }
      case 5: i += 4; break;
      default: throw new RangeError("unsupported wire type");
    }
  }
}

function isCancelOrOK(err: Error | undefined): boolean {
  const code = (err as { code?: number } | undefined)?.code;
  return err === undefined || code === grpc.status.CANCELLED || code === grpc.status.OK;
}

function fromWire(w: WireMessage): StreamMessage {
  const attributes: Record<string, Attribute> = {};
  for (const [name, a] of Object.entries(w.attributes ?? {})) {
    attributes[name] = { type: a.type, value: a.type.startsWith("Binary") ? Buffer.from(a.binaryValue).toString("base64") : a.stringValue };
  }
  return {
    id: w.id, body: w.body, attributes, priority: w.priority, attempts: w.attempts, receiveCount: w.receiveCount,
    maxAttempts: w.maxAttempts, sentAt: new Date(w.sentAtUnixMs), correlationId: w.correlationId,
    traceContext: w.traceContext, groupId: w.groupId, dedupId: w.dedupId, sequenceNumber: w.sequenceNumber,
    failureReason: w.failureReason, receipt: w.receipt, ttlSeconds: w.ttlSeconds,
  };
}

function toWireSettlement(s: Settlement): Record<string, unknown> {
  if ("ack" in s) return { receipt: s.receipt, ack: {} };
  if ("nack" in s) return { receipt: s.receipt, nack: { reason: s.nack.reason ?? "", delaySeconds: s.nack.delaySeconds } };
  if ("extend" in s) return { receipt: s.receipt, extend: { seconds: s.extend.seconds } };
  if ("snooze" in s) return { receipt: s.receipt, snooze: { seconds: s.snooze.seconds } };
  if ("release" in s) return { receipt: s.receipt, release: {} };
  return { receipt: s.receipt, deadLetter: { reason: s.deadLetter.reason ?? "" } };
}

function toWireEnvelope(m: OutgoingMessage): Record<string, unknown> {
  const attributes: Record<string, unknown> = {};
  for (const [name, a] of Object.entries(m.attributes ?? {})) {
    attributes[name] = a.type.startsWith("Binary")
      ? { type: a.type, binaryValue: Buffer.from(a.value, "base64") }
      : { type: a.type, stringValue: a.value };
  }
  return {
    body: m.body, attributes, priority: m.priority, maxAttempts: m.maxAttempts, ttlSeconds: m.ttlSeconds,
    correlationId: m.correlationId, traceContext: m.traceContext ?? traceParent(), delaySeconds: m.delaySeconds,
    deliverAtUnixMs: m.deliverAt?.getTime(), groupId: m.groupId ?? "", dedupId: m.dedupId ?? "",
  };
}

/** One message's outcome in a publish: its id, or why it was refused. */
export interface PublishResult extends Partial<SendResult> {
  error?: SluiceError;
}

/**
 * A producer stream: sends are pipelined on one stream and each resolves once the broker
 * confirmed it durable. Confirms may overtake one another; each promise gets its own.
 */
export class Publisher {
  private seq = 0;
  private readonly pending = new Map<number, { resolve: (r: PublishResult[]) => void; reject: (e: Error) => void }>();
  private readonly channel: StreamsClient;
  private readonly call: grpc.ClientDuplexStream<unknown, WirePublishConfirm>;
  private endErr: Error | undefined;
  private ended = false;
  private readonly ends: (() => void)[] = [];

  /** Opens a producer stream to the broker behind `client`. */
  constructor(client: Client) {
    this.channel = connect(client);
    this.call = this.channel.Publish(metadata(client));
    this.call.on("data", (c: WirePublishConfirm) => {
      const p = this.pending.get(c.seq);
      if (!p) return;
      this.pending.delete(c.seq);
      if (c.error) p.reject(new SluiceError(0, c.error.code, c.error.message));
      else p.resolve(c.results.map((r) => r.error
        ? { error: new SluiceError(0, r.error.code, r.error.message) }
        : { id: r.messageId, sequenceNumber: r.sequenceNumber || undefined }));
    });
    const end = (err: Error | undefined) => {
      if (this.ended) return;
      this.ended = true;
      this.endErr = err ?? new Error("sluice: the publish stream ended");
      for (const p of this.pending.values()) p.reject(this.endErr);
      this.pending.clear();
      this.channel.close();
      for (const f of this.ends.splice(0)) f();
    };
    this.call.on("error", (err: Error) => end(streamError(err)));
    this.call.on("end", () => end(undefined));
  }

  /**
   * Sends 1..10 messages to `queue` as one batch. Resolves with each message's result once
   * durable; rejects when the whole send was refused (a {@link SluiceError}) or the stream ended.
   */
  publish(queue: string, messages: OutgoingMessage[]): Promise<PublishResult[]> {
    if (this.ended) return Promise.reject(this.endErr);
    const seq = ++this.seq;
    return new Promise((resolve, reject) => {
      this.pending.set(seq, { resolve, reject });
      this.call.write({ seq, queue, messages: messages.map(toWireEnvelope) });
    });
  }

  /** Closes the stream once every send is confirmed. */
  close(): Promise<void> {
    if (this.ended) return Promise.resolve();
    return new Promise((resolve) => {
      this.ends.push(resolve);
      this.call.end();
    });
  }
}
