// The email example: a web server whose POST /signup queues a welcome email, and a worker
// pool that sends it (here: a line on standard output or in a file). It runs until SIGTERM
// or Ctrl-C, then lets the emails under way finish.
//
//   node dist/examples/email/main.js [broker URL] [listen port]

import { appendFile } from "node:fs/promises";
import { createServer } from "node:http";

import { Client, Pool } from "../../src/index.js";
import { Mailer, QUEUE, sendWelcome, signup } from "./email.js";

const brokerURL = process.argv[2] ?? "http://127.0.0.1:9324";
const port = Number(process.argv[3] ?? 8080);
const out = process.env.EMAIL_OUT; // a file the sent emails are appended to (default: standard output)

const client = new Client(brokerURL);
await client.createQueue(QUEUE);

const mailer: Mailer = {
  async send(to, subject) {
    const line = `${new Date().toISOString()} to=${to} subject=${JSON.stringify(subject)}\n`;
    if (out) await appendFile(out, line);
    else process.stdout.write(line);
  },
};

const stop = new AbortController();
process.once("SIGTERM", () => stop.abort());
process.once("SIGINT", () => stop.abort());

const server = createServer(signup(client));
server.listen(port, "127.0.0.1", () => console.error(`email example on http://127.0.0.1:${port}/signup, broker ${brokerURL}`));
const pool = new Pool({ client, queue: QUEUE, handler: sendWelcome(mailer), concurrency: 10 });
await pool.run(stop.signal);
server.close();
