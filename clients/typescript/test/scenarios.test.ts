// The seed's scenarios against a real broker: a poison message dead-lettered with its reason
// after its attempts, a slow worker losing its lease and a fast one taking the work, a kill -9
// of a worker process with every message's effect exactly once through idempotency keys in
// PostgreSQL, and a graceful stop that loses nothing.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import pg from "pg";

import { Client, ConsumerStream, LeaseLostError, Message, PgStore, Pool, Publisher, SluiceError, runOnce, stringAttr } from "../src/index.js";
import { Broker, database, eventually, queueName, sluiceBin, startBroker, stopProcess } from "./harness.js";

let bin: string;

const quiet = { info: () => {}, warn: () => {}, error: (m: string, f?: Record<string, unknown>) => console.error(m, f) };

let broker: Broker;
let client: Client;

before(async () => {
  bin = sluiceBin();
  broker = await startBroker(bin);
  client = new Client(broker.url);
});

after(async () => {
  await broker?.stop();
});

/** Creates a queue and its dead-letter queue (maxReceiveCount `max`). */
async function queueWithDLQ(prefix: string, max: number): Promise<string> {
  const q = queueName(prefix);
  const dlq = await client.createQueue(`${q}-dlq`);
  await client.createQueue(q, { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: max }) });
  return q;
}

for (const protocol of ["stream", "http"] as const) {
  describe(`poison message (${protocol})`, () => {
    it("is dead-lettered with its reason after its attempts while the others are handled", async () => {
      const q = await queueWithDLQ(`poison-${protocol}`, 3);
      const handled = new Set<string>();
      const pool = new Pool({
        client, queue: q, protocol, concurrency: 3, logger: quiet, waitSeconds: 1,
        handler: (m) => {
          const order = JSON.parse(m.body) as { order: number; poison?: boolean };
          if (order.poison) throw new Error(`order ${order.order} has no customer`);
          handled.add(m.body);
        },
      });
      const stop = new AbortController();
      const running = pool.run(stop.signal);
      await client.sendBatch(q, [1, 2, 3, 4].map((i) => ({ body: JSON.stringify({ order: i }) })));
      await client.send(q, { body: JSON.stringify({ order: 5, poison: true }) });
      await eventually("the poison message in the dead-letter queue", async () => (await client.stats(q)).deadLetters === 1);
      await eventually("4 orders handled", () => handled.size === 4);
      stop.abort();
      await running;
      const dead = await client.deadLetters(q);
      assert.equal(dead.messages.length, 1);
      assert.equal(dead.messages[0].failureReason, "order 5 has no customer");
      assert.equal(dead.messages[0].attempts, 3);
      const s = await client.stats(q);
      assert.deepEqual([s.visible, s.inFlight, s.delayed], [0, 0, 0]);
    });
  });
}

describe("a slow worker", () => {
  it("loses its lease at the stream's maximum hold, and a fast worker takes the work", async () => {
    const q = queueName("slow");
    await client.createQueue(q);
    const slowStop = new AbortController();
    let slowGot: Message | undefined;
    let slowReason: unknown;
    const slow = new Pool({
      client, queue: q, concurrency: 1, leaseSeconds: 1, maxHoldSeconds: 1, logger: quiet,
      handler: async (m, { signal }) => {
        slowGot = m;
        // Hung until the lease is lost; then this worker stops taking work.
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        slowReason = signal.reason;
        slowStop.abort();
        throw new Error("slow worker gave up");
      },
    });
    const slowRun = slow.run(slowStop.signal);
    await client.send(q, { body: "the work" });
    await eventually("the slow worker holds the message", () => slowGot !== undefined);

    const fastStop = new AbortController();
    const fastGot: Message[] = [];
    const fast = new Pool({ client, queue: q, concurrency: 2, logger: quiet, handler: (m) => void fastGot.push(m) });
    const fastRun = fast.run(fastStop.signal);
    await eventually("the fast worker handled the message", () => fastGot.length === 1);
    await slowRun;
    await eventually("the queue is empty", async () => (await client.stats(q)).depth === 0);
    fastStop.abort();
    await fastRun;

    assert.ok(slowReason instanceof LeaseLostError, `the slow handler's abort reason: ${String(slowReason)}`);
    assert.equal(fastGot[0].id, slowGot!.id);
    assert.ok(fastGot[0].receiveCount >= 2, `receive count ${fastGot[0].receiveCount}`);
    // The slow worker's late result was not applied: no nack with its reason.
    assert.notEqual(fastGot[0].failureReason, "slow worker gave up");
    assert.equal(fastGot.length, 1);
  });
});

describe("the HTTP source's heartbeat", () => {
  it("keeps a long handler's lease, and aborts the handler when an extend is refused", async () => {
    const q = queueName("heartbeat");
    await client.createQueue(q);
    let running = false;
    let reason: unknown;
    const stop = new AbortController();
    const pool = new Pool({
      client, queue: q, protocol: "http", leaseSeconds: 2, heartbeatSeconds: 0.5, waitSeconds: 1, logger: quiet,
      handler: async (_m, { signal }) => {
        running = true;
        await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
        reason = signal.reason;
      },
    });
    const run = pool.run(stop.signal);
    try {
      await client.send(q, { body: "long work" });
      await eventually("the handler runs", () => running);
      // Past two leases the message is still held: the heartbeat extends it.
      const start = Date.now();
      await eventually("two leases' time", () => Date.now() - start > 4_500, 10_000);
      const s = await client.stats(q);
      assert.deepEqual([s.visible, s.inFlight], [0, 1]);
      assert.equal(reason, undefined);
      await client.purgeQueue(q); // the receipt goes stale: the next extend is refused
      await eventually("the handler aborted", () => reason !== undefined);
      assert.ok((reason as unknown) instanceof LeaseLostError, String(reason));
    } finally {
      stop.abort();
      await run;
    }
  });
});

describe("graceful stop", () => {
  it("loses nothing: handlers finish, prefetched messages are released with their attempts given back", async () => {
    const q = queueName("graceful");
    await client.createQueue(q);
    const n = 60;
    for (let i = 0; i < n; i += 10) {
      await client.sendBatch(q, Array.from({ length: 10 }, (_, j) => ({ body: `m${i + j}` })));
    }
    const first: Message[] = [];
    const stop = new AbortController();
    const pool = new Pool({
      client, queue: q, concurrency: 4, prefetch: 6, logger: quiet,
      handler: async (m) => {
        // Work that takes a moment, so that the stop finds handlers running.
        await new Promise((r) => setTimeout(r, 20));
        first.push(m);
        if (first.length === 15) stop.abort();
      },
    });
    await pool.run(stop.signal);
    const afterStop = await client.stats(q);
    assert.equal(afterStop.inFlight, 0, "nothing stays leased after the stop");
    assert.equal(afterStop.visible, n - first.length, "every message not handled is back in the queue");

    const second: Message[] = [];
    const stop2 = new AbortController();
    const pool2 = new Pool({ client, queue: q, concurrency: 4, logger: quiet, handler: (m) => void second.push(m) });
    const run2 = pool2.run(stop2.signal);
    await eventually("the rest handled", () => first.length + second.length >= n);
    stop2.abort();
    await run2;
    const ids = [...first, ...second].map((m) => m.body);
    assert.equal(new Set(ids).size, n, "every message handled");
    assert.equal(ids.length, n, "no message handled twice");
    for (const m of [...first, ...second]) assert.equal(m.attempts, 1, `${m.body}: a release gives its attempt back`);
    assert.equal((await client.stats(q)).depth, 0);
  });
});

describe("kill -9 of a worker process", () => {
  it("processes every message exactly once through idempotency keys in PostgreSQL", async (t) => {
    const dbURL = await database(t);
    if (!dbURL) return;
    const db = new pg.Pool({ connectionString: dbURL, max: 2 });
    try {
      await killNine(db, dbURL);
    } finally {
      await db.end();
    }
  });
});

describe("PgStore", () => {
  it("records keys in the handler's transaction, and serves runOnce", async (t) => {
    const dbURL = await database(t);
    if (!dbURL) return;
    const db = new pg.Pool({ connectionString: dbURL, max: 4 });
    try {
      const store = await PgStore.create(db);
      await PgStore.create(db); // a second create finds the table
      await db.query("CREATE TABLE writes (v text)");
      assert.equal(await store.inTx("a", async (tx) => void (await tx.query("INSERT INTO writes VALUES ('a')"))), true);
      assert.equal(await store.inTx("a", async (tx) => void (await tx.query("INSERT INTO writes VALUES ('again')"))), false);
      await assert.rejects(store.inTx("b", async (tx) => {
        await tx.query("INSERT INTO writes VALUES ('b')");
        throw new Error("rolled back");
      }), /rolled back/);
      assert.deepEqual((await db.query("SELECT v FROM writes ORDER BY v")).rows.map((r) => r.v), ["a"]);
      assert.equal(await store.seen("b"), false, "a rolled-back key is not recorded");
      assert.equal(await runOnce(store, "c", "at-most-once", async () => {}), true);
      assert.equal(await runOnce(store, "c", "at-most-once", async () => assert.fail("ran twice")), false);
      await store.forget("c");
      assert.equal(await store.seen("c"), false);
      assert.equal(await store.prune(new Date(Date.now() + 60_000)), 1, "prune deletes the older keys");
      await assert.rejects(PgStore.create(db, { table: "bad-name" }), /letters, digits or underscores/);
    } finally {
      await db.end();
    }
  });
  // A worker starting beside another's handler whose transaction recorded a key neither
  // waits for that transaction nor holds the keys recorded after it: create runs no DDL when
  // the table and its index exist (CREATE INDEX IF NOT EXISTS takes a SHARE lock on the
  // table before it looks). The pool's lock_timeout turns such a wait into an error.
  it("is created beside an open transaction that recorded a key", async (t) => {
    const dbURL = await database(t);
    if (!dbURL) return;
    const db = new pg.Pool({ connectionString: dbURL, max: 4, options: "-c lock_timeout=5000" });
    try {
      for (const o of [{}, { schema: "public", table: "keys_in_schema" }]) {
        const store = await PgStore.create(db, o);
        const tx = await db.connect();
        try {
          await tx.query("BEGIN");
          assert.equal(await store.claimTx(tx, "held"), true);
          await PgStore.create(db, o);
          assert.equal(await store.claim("after"), true, "a key recorded after the create");
        } finally {
          await tx.query("ROLLBACK");
          tx.release();
        }
      }
    } finally {
      await db.end();
    }
  });
});

async function killNine(db: pg.Pool, dbURL: string): Promise<void> {
    await db.query("CREATE TABLE effects (key text NOT NULL, pid int NOT NULL)");
    await db.query("CREATE TABLE skips (key text NOT NULL)");
    const q = queueName("kill9");
    await client.createQueue(q);
    const n = 200;
    for (let i = 0; i < n; i += 10) {
      await client.sendBatch(q, Array.from({ length: 10 }, (_, j) => ({
        body: `job ${i + j}`, attributes: { IdempotencyKey: stringAttr(`kill9/job-${i + j}`) },
      })));
    }
    const script = fileURLToPath(new URL("./killworker.js", import.meta.url));
    // The first worker's handlers stop returning once it has committed half of the effects:
    // those past it commit and wait, unacked, for the kill. The kill always finds work left,
    // and committed work whose message comes back, however fast the machine.
    const startWorker = (commits?: number) => {
      const args = [script, broker.url, q, dbURL, ...(commits === undefined ? [] : [String(commits)])];
      const p = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
      p.stdout!.resume();
      return p;
    };
    const count = async (sql: string) => Number((await db.query(sql)).rows[0].n);

    const w1 = startWorker(n / 2);
    try {
      await eventually("the first worker committed past half of the effects", async () => (await count("SELECT count(*) AS n FROM effects")) > n / 2, 60_000);
    } finally {
      await stopProcess(w1, "SIGKILL");
    }
    const byFirst = await count("SELECT count(*) AS n FROM effects");
    assert.ok(byFirst < n, `the first worker did everything (${byFirst}) before its kill`);

    const w2 = startWorker();
    try {
      await eventually("every effect recorded", async () => (await count("SELECT count(DISTINCT key) AS n FROM effects")) === n, 60_000);
      await eventually("the queue is empty", async () => (await client.stats(q)).depth === 0);
      assert.equal(await stopProcess(w2), 0, "the second worker stops cleanly on SIGTERM");
    } finally {
      await stopProcess(w2, "SIGKILL");
    }

    assert.equal(await count("SELECT count(*) AS n FROM effects"), n, "each effect exactly once");
    assert.equal(await count("SELECT count(*) AS n FROM sluice_idempotency_keys"), n);
    assert.equal(await count(`SELECT count(DISTINCT pid) AS n FROM effects`), 2, "both workers did part of the work");
    assert.ok(await count("SELECT count(*) AS n FROM skips") >= 1, "a redelivery of committed work was skipped by its key");
}

describe("client and publisher", () => {
  it("answers the broker's errors as SluiceErrors with the native API's code", async () => {
    const err = await client.send(queueName("missing"), { body: "x" }).then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof SluiceError, String(err));
    assert.equal(err.status, 404);
    assert.equal(err.code, "queue_not_found");
  });

  it("answers a stream the broker refuses with the native API's code", async () => {
    const err = await ConsumerStream.open(client, queueName("missing"), { credit: 1, onMessages: () => {} }).then(
      (s) => s.close().then(() => undefined), (e: unknown) => e);
    assert.ok(err instanceof SluiceError, String(err));
    assert.equal(err.code, "queue_not_found");
  });

  it("publishes on a stream: durable confirms, per-message and whole-send refusals", async () => {
    const q = queueName("publish");
    await client.createQueue(q);
    const p = new Publisher(client);
    try {
      const [a, b] = await Promise.all([
        p.publish(q, [{ body: "one", priority: 5 }, { body: "two", priority: 500 }]),
        p.publish(q, [{ body: "three", correlationId: "c-3" }]),
      ]);
      assert.ok(a[0].id && !a[0].error);
      assert.equal(a[1].error?.code, "invalid_parameter");
      assert.ok(b[0].id);
      const whole = await p.publish(queueName("missing"), [{ body: "x" }]).then(() => undefined, (e: unknown) => e);
      assert.ok(whole instanceof SluiceError && whole.code === "queue_not_found", String(whole));
    } finally {
      await p.close();
    }
    const got = await client.receive(q, { max: 10, waitSeconds: 1 });
    assert.deepEqual(got.map((m) => m.body).sort(), ["one", "three"]);
    assert.equal(got.find((m) => m.body === "one")!.priority, 5);
  });

  it("carries a handled message's trace context on to the messages its handler sends", async () => {
    const q = queueName("trace");
    const next = `${q}-next`;
    await client.createQueue(q);
    await client.createQueue(next);
    const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    const stop = new AbortController();
    let sent = false;
    const pool = new Pool({
      client, queue: q, logger: quiet,
      handler: async (m) => {
        await client.send(next, { body: `after ${m.body}` });
        sent = true;
      },
    });
    const running = pool.run(stop.signal);
    await client.send(q, { body: "signup", traceContext: tp });
    await eventually("the follow-up sent", () => sent);
    stop.abort();
    await running;
    const [m] = await client.receive(next, { waitSeconds: 1 });
    assert.equal(m.body, "after signup");
    assert.equal(m.traceContext, tp);
  });
});

describe("a broker restart", () => {
  it("ends the stream; the pool opens a new one and goes on", async () => {
    let b = await startBroker(bin);
    const c = new Client(b.url);
    const q = queueName("restart");
    await c.createQueue(q);
    const got: string[] = [];
    const warnings: string[] = [];
    const stop = new AbortController();
    const pool = new Pool({
      client: c, queue: q, logger: { info() {}, warn: (m) => void warnings.push(m), error: (m) => void warnings.push(m) },
      handler: (m) => void got.push(m.body),
    });
    const running = pool.run(stop.signal);
    try {
      await c.send(q, { body: "before" });
      await eventually("the first message handled", () => got.length === 1);
      await b.stop(true);
      b = await startBroker(bin, { addr: new URL(b.url).host, data: b.data });
      await c.send(q, { body: "after" });
      await eventually("the message sent after the restart handled", () => got.length === 2, 60_000);
      assert.deepEqual(got, ["before", "after"]);
      assert.ok(warnings.some((w) => w.includes("consumer stream")), `the lost stream was logged: ${warnings.join("; ")}`);
      await eventually("the queue is empty", async () => (await c.stats(q)).depth === 0);
    } finally {
      stop.abort();
      await running;
      await b.stop();
    }
  });
});

describe("message status", () => {
  it("tells what became of a job: its failures, then its completion with the ack's result", async () => {
    const q = queueName("status");
    await client.createQueue(q, { CompletedRetentionSeconds: "600" });
    const { id } = await client.send(q, { body: "job" });
    assert.equal((await client.messageStatus(q, id))?.state, "ready");
    let [m] = await client.receive(q, { waitSeconds: 5 });
    await client.nack(q, m.receipt, { reason: "smtp timeout", delaySeconds: 0 });
    const failed = await client.messageStatus(q, id);
    assert.equal(failed?.reason, "smtp timeout");
    assert.equal(failed?.failureCount, 1);
    assert.deepEqual(failed?.failures?.map((f) => f.reason), ["smtp timeout"]);
    [m] = await client.receive(q, { waitSeconds: 5 });
    await client.ack(q, m.receipt, { result: '{"sent":true}' });
    const done = await client.messageStatus(q, id);
    assert.equal(done?.state, "completed");
    assert.equal(done?.result, '{"sent":true}');
    assert.equal(done?.attempts, 2);
    assert.equal(await client.messageStatus(q, "00000000-0000-4000-8000-000000000000"), null);
    await assert.rejects(client.messageStatus("no-such-queue", id), (e: unknown) => e instanceof SluiceError && e.code === "queue_not_found");
  });
});
