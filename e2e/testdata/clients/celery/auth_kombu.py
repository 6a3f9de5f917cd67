#!/usr/bin/python3
"""kombu's asynchronous SQS connection (the presigned GET requests of a
Celery worker's event loop) against a sluice broker with access keys; the
credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. Run by
e2e/clients_auth_test.go.

usage: auth_kombu.py QUEUE_URL EXPECT
  EXPECT is "ok" or the error code the GET must be refused with.
"""
import sys
import time
import types

import boto3
from kombu.asynchronous import Hub, set_event_loop
from kombu.asynchronous.aws.sqs.connection import AsyncSQSConnection
from vine import promise


def main():
    url, expect = sys.argv[1:]
    endpoint = url.rsplit("/", 2)[0]
    hub = Hub()
    set_event_loop(hub)
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    conn = AsyncSQSConnection(sqs_connection=sqs, region="us-east-1")
    # An error answer raises inside kombu's event loop, which may log it
    # rather than fail the promise: note every error answer's body here.
    errors = []
    for_status = conn._for_status

    def noted(response, body):
        errors.append(body)
        return for_status(response, body)
    conn._for_status = noted
    done = promise()
    conn.get_queue_attributes(types.SimpleNamespace(id=url), "All", callback=done)
    deadline = time.monotonic() + 90
    reason = None
    while not done.ready:
        if time.monotonic() > deadline:
            print("FAIL: no answer within 90 s", flush=True)
            return 1
        if errors:
            reason = repr(errors[0])
            break
        try:
            hub.run_once()
        except Exception as e:  # kombu raises an HTTP error out of the loop
            reason = repr(e)
            break
    if reason is None and done.failed:
        reason = repr(done.reason)
    if reason is not None:
        if expect != "ok" and expect in reason:
            print("refused as expected:", reason[:300], flush=True)
            return 0
        print("FAIL: GetQueueAttributes (presigned GET) failed:", reason[:500], flush=True)
        return 1
    (value,), _ = done.value
    if expect != "ok":
        print("FAIL: GetQueueAttributes succeeded, want", expect, value, flush=True)
        return 1
    print("ok: presigned GET GetQueueAttributes answered", value.get("Attributes", {}).get("QueueArn"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
