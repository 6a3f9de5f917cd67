#!/usr/bin/python3
"""Drives kombu's own asynchronous SQS connection, the code a Celery worker's
event loop uses, against a sluice broker.

kombu 5.2 builds these query requests itself (no Version parameter) and sends
DeleteMessage, ChangeMessageVisibility and GetQueueAttributes as GET requests with a presigned SigV4 query string; ReceiveMessage is a POST to
the queue URL. A Celery task round trip does not reach the GET paths (its acks
go through boto3), so this script calls them directly.

usage: kombu_async.py ENDPOINT PREFIX
"""
import sys
import time
import traceback
import types

import boto3
import kombu
from kombu.asynchronous import Hub, set_event_loop
from kombu.asynchronous.aws.sqs.connection import AsyncSQSConnection
from vine import promise


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)
    print("ok:", what, flush=True)


def main():
    endpoint, prefix = sys.argv[1:]
    print("kombu", kombu.__version__, "boto3", boto3.__version__, flush=True)
    hub = Hub()
    set_event_loop(hub)
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="AKIDKOMBU", aws_secret_access_key="secret")
    conn = AsyncSQSConnection(sqs_connection=sqs, region="us-east-1")

    def call(what, fn, *args, timeout=30, **kwargs):
        done = promise()
        fn(*args, callback=done, **kwargs)
        deadline = time.monotonic() + timeout
        while not done.ready:
            if time.monotonic() > deadline:
                raise Failed("%s: no answer within %ds" % (what, timeout))
            hub.run_once()
        if done.failed:
            raise Failed("%s failed: %r" % (what, done.reason))
        (value,), _ = done.value
        return value

    # kombu's transport creates queues through boto3 (its async create_queue
    # signs a relative URL and cannot work), so this does too.
    url = sqs.create_queue(QueueName=prefix + "-async", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    q = types.SimpleNamespace(id=url)

    sent = sqs.send_message(QueueUrl=url, MessageBody="hello kombu")
    msgs = call("ReceiveMessage", conn.receive_message, q, url, number_messages=1, wait_time_seconds=5)
    got = msgs.get("Messages", []) if isinstance(msgs, dict) else msgs
    check(len(got) == 1 and got[0]["Body"] == "hello kombu" and got[0]["MessageId"] == sent["MessageId"],
          "async ReceiveMessage (POST to the queue URL) got the message")
    check(got[0]["Attributes"]["ApproximateReceiveCount"] == "1", "ApproximateReceiveCount 1")

    status = call("ChangeMessageVisibility", conn.change_message_visibility, q, got[0]["ReceiptHandle"], 0)
    check(status == 200, "async ChangeMessageVisibility (GET) answered %r" % status)
    msgs = call("ReceiveMessage", conn.receive_message, q, url, number_messages=1, wait_time_seconds=5)
    got = msgs.get("Messages", [])
    check(len(got) == 1 and got[0]["Attributes"]["ApproximateReceiveCount"] == "2", "visible again after the change")

    attrs = call("GetQueueAttributes", conn.get_queue_attributes, q, "All")
    a = attrs.get("Attributes", {})
    check(a.get("ApproximateNumberOfMessagesNotVisible") == "1" and a.get("VisibilityTimeout") == "30",
          "async GetQueueAttributes (GET) answered %r" % a)

    status = call("DeleteMessage", conn.delete_message, url, got[0]["ReceiptHandle"])
    check(status == 200, "async DeleteMessage (GET) answered %r" % status)
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    check((a["ApproximateNumberOfMessages"], a["ApproximateNumberOfMessagesNotVisible"]) == ("0", "0"),
          "the queue is empty after the async delete")
    print("PASSED", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        print("FAILED", file=sys.stderr)
        sys.exit(1)
