// A worker process for the kill -9 scenario: it takes the messages of a queue over a consumer
// stream and records each one's effect in PostgreSQL in the transaction that records its
// idempotency key. It prints "ready" once its stream is open and stops gracefully on
// SIGTERM. Arguments: the broker's URL, the queue, the database's URL, and optionally how many
// effects it may commit before its handlers stop returning: past those, a handler commits its
// effect and then waits for the kill without acking, so that the kill always finds work left
// and committed work unacked, however fast the machine. A message whose key was recorded
// already (work done, its ack lost with a killed worker) adds a row to the table skips.

import pg from "pg";

import { Client, PgStore, Pool, idempotencyKey } from "../src/index.js";

const [brokerURL, queue, dbURL, commitsArg] = process.argv.slice(2);
const commits = commitsArg ? Number(commitsArg) : Infinity;
let written = 0;
const db = new pg.Pool({ connectionString: dbURL, max: 8 });
const store = await PgStore.create(db);
const client = new Client(brokerURL);
const stop = new AbortController();
process.on("SIGTERM", () => stop.abort());

const pool = new Pool({
  client, queue, concurrency: 4, prefetch: 4, leaseSeconds: 30,
  logger: { info: () => {}, warn: () => {}, error: (m, f) => console.error(m, f) },
  handler: async (m) => {
    const ran = await store.inTx(idempotencyKey(m), async (tx) => {
      await tx.query("INSERT INTO effects (key, pid) VALUES ($1, $2)", [idempotencyKey(m), process.pid]);
      // The work takes a moment, so that a kill finds transactions open.
      await new Promise((r) => setTimeout(r, 2));
    });
    if (!ran) {
      await db.query("INSERT INTO skips (key) VALUES ($1)", [idempotencyKey(m)]);
      return;
    }
    if (++written > commits) {
      await new Promise(() => {}); // committed, never acked: the kill hands it back
    }
  },
});
console.log("ready");
await pool.run(stop.signal);
await db.end();
