// The email example's parts: a signup handler that queues the welcome email and answers 202
// at once, and the worker's handler that sends it. main.ts wires them; the package's test
// (test/email.test.ts) runs them against a real broker.

import type { IncomingMessage, ServerResponse } from "node:http";

import { Client, Handler, json, stringAttr } from "../../src/index.js";

/** The queue of welcome emails. */
export const QUEUE = "email-welcome";

/** A welcome email's message body. */
export interface Welcome {
  to: string;
}

/** Sends an email. */
export interface Mailer {
  send(to: string, subject: string, body: string, signal: AbortSignal): Promise<void>;
}

const address = /^[^\s@<>]+@[^\s@<>]+\.[^\s@<>]+$/;

/**
 * `POST /signup` with a form field `email`: queues the welcome email and answers 202 at
 * once; a slow or failing mail server delays the email, never the page. The idempotency
 * key (`welcome/<address>`) makes a second signup's email, or a redelivery, a duplicate.
 */
export function signup(client: Client): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  return async (req, res) => {
    if (req.method !== "POST") {
      res.writeHead(405, { Allow: "POST" }).end("use POST with a form field email\n");
      return;
    }
    let raw = "";
    for await (const chunk of req) {
      raw += chunk;
      if (raw.length > 64 * 1024) {
        res.writeHead(413).end("form too large\n");
        return;
      }
    }
    const email = new URLSearchParams(raw).get("email")?.trim() ?? "";
    if (!address.test(email)) {
      res.writeHead(400).end("the form field email is not an email address\n");
      return;
    }
    try {
      await client.send(QUEUE, {
        body: JSON.stringify({ to: email } satisfies Welcome),
        attributes: { IdempotencyKey: stringAttr(`welcome/${email}`) },
      });
    } catch (err) {
      res.writeHead(503).end(`could not queue the welcome email, try again: ${(err as Error).message}\n`);
      return;
    }
    res.writeHead(202).end(`welcome email to ${email} queued\n`);
  };
}

/** The worker's handler: sends the welcome email (a failure nacks it for a retry). */
export function sendWelcome(mailer: Mailer): Handler {
  return json<Welcome>((_m, w, { signal }) => mailer.send(w.to, "Welcome!", "Hello, and welcome.", signal));
}
