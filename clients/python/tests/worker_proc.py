"""A worker process for the scenarios: ``worker_proc.py BROKER QUEUE MODE TARGET``.

MODE ``pg``: each message's effect is a row in TARGET's (a PostgreSQL URL)
table ``effects``, written through PgStore.in_tx with the message's key, so
that a redelivered message adds nothing. MODE ``file``: each message appends
"ID ATTEMPTS" to the file TARGET. Each handler works for 50 ms (100 ms in pg
mode after its transaction's commit, so that a kill leaves effects whose
messages come back). It runs
until SIGTERM (a graceful stop) or SIGKILL.
"""

import logging
import os
import sys
import time

from sluice import Client, Worker
from sluice.idempotency import PgStore, key


def main():
    broker, queue, mode, target = sys.argv[1:5]
    logging.basicConfig(level=logging.WARNING, format="worker %(process)d: %(message)s")
    if mode == "pg":
        import psycopg

        store = PgStore(target)

        def handler(m):
            k = key(m)
            if not store.in_tx(k, lambda conn: conn.execute("INSERT INTO effects (key) VALUES (%s)", (k,))):
                # A redelivery of work done (its ack was lost with the killed
                # worker): nothing written; noted for the test's figures.
                with psycopg.connect(target, autocommit=True) as conn:
                    conn.execute("INSERT INTO skips (key) VALUES (%s)", (k,))
                return
            # More work after the commit: a worker killed now has written its
            # effect and not acked the message, which comes back.
            time.sleep(0.1)
    else:
        fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

        def handler(m):
            time.sleep(0.05)  # the work
            os.write(fd, f"{m.id} {m.attempts}\n".encode())

    Worker(Client(broker), queue, handler, concurrency=8, prefetch=4, grace_seconds=30).run()


if __name__ == "__main__":
    main()
