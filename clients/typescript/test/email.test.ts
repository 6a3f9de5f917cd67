// The email example against a real broker: the answer comes before the email is sent (the
// mailer is held until the answer), and the email is sent once.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, it } from "node:test";

import { Client, Pool } from "../src/index.js";
import { Mailer, QUEUE, sendWelcome, signup } from "../examples/email/email.js";
import { Broker, eventually, sluiceBin, startBroker } from "./harness.js";

let broker: Broker;
before(async () => {
  broker = await startBroker(sluiceBin());
});
after(async () => {
  await broker?.stop();
});

it("answers 202 before the email is sent, and sends it once", async () => {
  const client = new Client(broker.url);
  await client.createQueue(QUEUE);
  const sent: string[] = [];
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  let started = false;
  const mailer: Mailer = {
    async send(to) {
      started = true;
      await held;
      sent.push(to);
    },
  };
  const stop = new AbortController();
  const pool = new Pool({ client, queue: QUEUE, handler: sendWelcome(mailer), logger: { info() {}, warn() {}, error: console.error } });
  const running = pool.run(stop.signal);
  const server = createServer(signup(client)).listen(0, "127.0.0.1");
  await new Promise((r) => server.once("listening", r));
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const res = await fetch(`${base}/signup`, { method: "POST", body: new URLSearchParams({ email: "ada@example.com" }) });
    assert.equal(res.status, 202);
    assert.equal(sent.length, 0, "the answer came before the email was sent");
    const bad = await fetch(`${base}/signup`, { method: "POST", body: new URLSearchParams({ email: "not an address" }) });
    assert.equal(bad.status, 400);
    release();
    await eventually("the email sent", () => sent.length === 1);
    await eventually("the message acked", async () => (await client.stats(QUEUE)).depth === 0);
    assert.ok(started);
    assert.deepEqual(sent, ["ada@example.com"]);
  } finally {
    stop.abort();
    await running;
    server.close();
  }
});
