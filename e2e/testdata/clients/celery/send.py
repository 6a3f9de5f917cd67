#!/usr/bin/python3
"""Sends tasks through Celery (kombu's SQS transport) and exits.

usage: send.py OUTDIR N
Sends sluice.record(OUTDIR, i, payload) for i in 0..N-1, in one message group
when SLUICE_QUEUE is a FIFO queue. See sluicetasks.py for the environment.
"""
import sys

import celery
import kombu

from sluicetasks import app, record


def main():
    outdir, n = sys.argv[1], int(sys.argv[2])
    print("celery", celery.__version__, "kombu", kombu.__version__, flush=True)
    fifo = app.conf.task_default_queue.endswith(".fifo")
    with app.connection_for_write() as conn:
        for i in range(n):
            opts = {"MessageGroupId": "sluice-group"} if fifo else {}
            r = record.apply_async(args=(outdir, i, "payload %d \u00e9\u6f22" % i), connection=conn, **opts)
            print("sent", i, r.id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
