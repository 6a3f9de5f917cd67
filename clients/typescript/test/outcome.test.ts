// The outcome rule, without a broker.

import assert from "node:assert/strict";
import { it } from "node:test";

import { MAX_REASON_BYTES, MemoryStore, cutReason, onceByKey, runOnce, uncertain, deadLetterNow, idempotencyKey, json, mux, outcomeOf, retryAfter, snooze, stringAttr } from "../src/index.js";
import type { Message } from "../src/index.js";

it("maps a handler's result to its outcome", () => {
  assert.deepEqual(outcomeOf(undefined, false), { kind: "ack" });
  assert.deepEqual(outcomeOf(new Error("boom"), true), { kind: "nack", reason: "boom" });
  assert.deepEqual(outcomeOf("plain string", true), { kind: "nack", reason: "plain string" });
  assert.deepEqual(outcomeOf(retryAfter(0.2, new Error("busy")), true), { kind: "nack", reason: "busy", delaySeconds: 1 });
  assert.deepEqual(outcomeOf(retryAfter(1e9), true), { kind: "nack", reason: "retry after 1000000000s", delaySeconds: 43200 });
  assert.deepEqual(outcomeOf(snooze(60), true), { kind: "snooze", delaySeconds: 60 });
  assert.deepEqual(outcomeOf(deadLetterNow("never"), true), { kind: "deadLetter", reason: "never" });
  assert.deepEqual(outcomeOf(new Error("cut short"), true, true), { kind: "release" });
  assert.deepEqual(outcomeOf(deadLetterNow("never"), true, true), { kind: "deadLetter", reason: "never" });
  // A retry-after is the handler's own choice, not the interruption's: a nack, as the Go pool's.
  assert.deepEqual(outcomeOf(retryAfter(5, new Error("busy")), true, true), { kind: "nack", reason: "busy", delaySeconds: 5 });
});

it("cuts reasons to 1 KiB at a character boundary", () => {
  const r = cutReason("é".repeat(1000));
  assert.equal(Buffer.byteLength(r), MAX_REASON_BYTES);
  assert.equal(cutReason("a\ud800b"), "a\ufffdb");
  const odd = cutReason("a" + "é".repeat(600));
  assert.ok(Buffer.byteLength(odd) <= MAX_REASON_BYTES && !odd.includes("\ufffd"));
});

const msg = (body: string, attributes: Message["attributes"] = {}): Message => ({
  queue: "q", id: "id-1", body, attributes, priority: 0, attempts: 1, receiveCount: 1, maxAttempts: 0,
  sentAt: new Date(0), correlationId: "", traceContext: "", groupId: "", failureReason: "", receipt: "r",
});
const ctx = { signal: new AbortController().signal };

it("json dead-letters a body that does not parse", async () => {
  let got: unknown;
  const h = json<{ to: string }>((_m, p) => void (got = p.to));
  await h(msg('{"to":"ada@example.com"}'), ctx);
  assert.equal(got, "ada@example.com");
  assert.throws(() => h(msg("{nope"), ctx), (e: unknown) => outcomeOf(e, true).kind === "deadLetter");
});

it("mux routes on an attribute and nacks an unknown type", async () => {
  const seen: string[] = [];
  const h = mux("type", { welcome: () => void seen.push("welcome") });
  await h(msg("", { type: stringAttr("welcome") }), ctx);
  assert.deepEqual(seen, ["welcome"]);
  assert.throws(() => h(msg("", { type: stringAttr("refund") }), ctx), /no handler for message type "refund"/);
});

it("the idempotency key is the IdempotencyKey attribute, else the id", () => {
  assert.equal(idempotencyKey(msg("", { IdempotencyKey: stringAttr("pay/42") })), "pay/42");
  assert.equal(idempotencyKey(msg("")), "id-1");
});

it("runOnce: at most once forgets the key after a failure unless it is uncertain; at least once records after", async () => {
  const store = new MemoryStore();
  let runs = 0;
  await assert.rejects(runOnce(store, "k1", "at-most-once", async () => { runs++; throw new Error("down"); }), /down/);
  assert.equal(await store.seen("k1"), false, "a failure forgets the key");
  assert.equal(await runOnce(store, "k1", "at-most-once", async () => void runs++), true);
  assert.equal(await runOnce(store, "k1", "at-most-once", async () => void runs++), false);
  assert.equal(runs, 2);
  await assert.rejects(runOnce(store, "k2", "at-most-once", async () => { throw uncertain(new Error("timeout")); }), /effect may have happened/);
  assert.equal(await store.seen("k2"), true, "an uncertain failure keeps the key");
  await assert.rejects(runOnce(store, "k3", "at-least-once", async () => { throw new Error("no"); }), /no/);
  assert.equal(await store.seen("k3"), false);
  assert.equal(await runOnce(store, "k3", "at-least-once", async () => {}), true);
  assert.equal(await store.seen("k3"), true);
  await assert.rejects(runOnce(store, "k4", "sometimes" as never, async () => {}), /choose/);
  let calls = 0;
  const h = onceByKey(store, "at-most-once", () => void calls++);
  await h(msg("", { IdempotencyKey: stringAttr("pay/7") }), ctx);
  await h(msg("", { IdempotencyKey: stringAttr("pay/7") }), ctx);
  assert.equal(calls, 1);
});
