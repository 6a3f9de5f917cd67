"""email: answer now, send later (the Python twin of the repository's examples/email).

A web handler (POST /signup with a form field ``email``) checks the address,
queues a Welcome message on the ``email-welcome`` queue and answers 202 at
once; a worker pool sends the email later. A slow or failing mail server
delays the email, never the web page.

    python3 email_example.py --broker http://127.0.0.1:9324 --listen 127.0.0.1:8080 --out emails.log
    curl -d email=ada@example.com http://127.0.0.1:8080/signup

It runs until SIGTERM or Ctrl-C, then lets the emails under way finish.
"""

from __future__ import annotations

import argparse
import email.utils
import http.server
import json
import sys
import threading
import time
import urllib.parse

from sluice import Client, SluiceError, Worker, json_handler

QUEUE = "email-welcome"


class LogMailer:
    """"Sends" an email by writing one line to a file: it stands in for a
    mail server. Safe for concurrent use."""

    def __init__(self, out):
        self.out = out
        self.lock = threading.Lock()

    def send(self, to: str, subject: str, body: str) -> None:
        with self.lock:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            self.out.write(f"{stamp} to={to} subject={json.dumps(subject)}\n")
            self.out.flush()


def send_welcome(mailer):
    """The worker's handler: sends the welcome email of each message. An
    exception from the mailer nacks the message, and the queue's retry policy
    tries it again later; a body that is not JSON is dead-lettered."""

    @json_handler
    def handler(m, welcome):
        mailer.send(welcome["to"], "Welcome!", "Hello, and welcome.")

    return handler


def signup_handler(client: Client):
    """The web handler class: POST /signup enqueues a Welcome and answers 202."""

    class Signup(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            if self.path != "/signup":
                self.send_error(404)
                return
            n = int(self.headers.get("Content-Length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(n).decode())
            _, addr = email.utils.parseaddr((form.get("email") or [""])[0])
            if "@" not in addr:
                self.answer(400, "the form field email is not an email address\n")
                return
            # The idempotency key is the work itself: a signup retried by the
            # browser enqueues a second message with the same key, and a
            # worker that records keys sends once.
            try:
                client.send(QUEUE, json.dumps({"to": addr}), idempotency_key="welcome/" + addr)
            except SluiceError as e:
                self.answer(503, f"could not queue the welcome email, try again: {e}\n")
                return
            self.answer(202, f"welcome email to {addr} queued\n")

        def answer(self, status, text):
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.end_headers()
            self.wfile.write(text.encode())

        def log_message(self, *args):
            pass

    return Signup


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--broker", default="http://127.0.0.1:9324", help="the broker's base URL")
    ap.add_argument("--listen", default="127.0.0.1:8080", help="the web server's address")
    ap.add_argument("--out", default="", help="file the sent emails are appended to (default: standard output)")
    args = ap.parse_args(argv)
    client = Client(args.broker)
    client.create_queue(QUEUE)
    out = open(args.out, "a") if args.out else sys.stdout
    host, port = args.listen.rsplit(":", 1)
    srv = http.server.ThreadingHTTPServer((host, int(port)), signup_handler(client))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    print(f"email example: listening on {srv.server_address[0]}:{srv.server_address[1]}, broker {args.broker}",
          file=sys.stderr, flush=True)
    Worker(client, QUEUE, send_welcome(LogMailer(out)), concurrency=10).run()  # until SIGTERM
    srv.shutdown()


if __name__ == "__main__":
    main()
