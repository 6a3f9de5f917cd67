"""Backpressure through boto3: a send to a full queue (MaxDepth) is refused
with RequestThrottled (HTTP 403), and boto3 retries it as throttling until a
consumer made room. Run by e2e/clients_backpressure_test.go.

usage: python3 backpressure.py ENDPOINT QUEUE RETRY_MODE PROTOCOL
  RETRY_MODE is botocore's retry mode ("standard" or "legacy"); PROTOCOL the
  wire protocol this boto3 must speak ("json" or "query").

The consumer makes room from botocore's needs-retry event of the refused
attempt: the retry that follows can only succeed if boto3 decided to retry.
Prints one line per step and, last, "attempts=N statuses=S codes=C"; exits 1
with the reason on the first failure.
"""

import sys

import boto3
import botocore
from botocore.config import Config


def check(cond, what):
    if not cond:
        print("FAILED:", what)
        sys.exit(1)
    print("ok:", what)


def main():
    endpoint, queue, mode, protocol = sys.argv[1:5]
    producer = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                            config=Config(retries={"mode": mode}))
    # The consumer must not retry: its calls happen inside the producer's.
    consumer = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                            config=Config(retries={"mode": "standard", "max_attempts": 1}))
    check(producer.meta.service_model.protocol == protocol,
          "botocore %s speaks %s (want %s)" % (botocore.__version__, producer.meta.service_model.protocol, protocol))

    url = producer.create_queue(QueueName=queue, Attributes={"MaxDepth": "1"})["QueueUrl"]
    producer.send_message(QueueUrl=url, MessageBody="first")

    seen = []  # (status, error code) of each SendMessage attempt answered

    def on_needs_retry(response=None, attempts=None, caught_exception=None, **_):
        if response is None:
            # A connection error (no answer): botocore retries it as such.
            print("note: attempt", attempts, "got no answer:", caught_exception)
            return None
        http, parsed = response
        code = parsed.get("Error", {}).get("Code")
        seen.append((http.status_code, code))
        if http.status_code == 403 and len(seen) == 1:
            # A consumer takes the message that fills the queue.
            got = consumer.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
            check(len(got) == 1 and got[0]["Body"] == "first", "the consumer received the message that fills the queue")
            consumer.delete_message(QueueUrl=url, ReceiptHandle=got[0]["ReceiptHandle"])
            print("ok: the consumer made room after attempt", attempts)
        return None

    producer.meta.events.register("needs-retry.sqs.SendMessage", on_needs_retry)
    out = producer.send_message(QueueUrl=url, MessageBody="second")
    check("MessageId" in out, "the send to the full queue succeeded after retries")
    check(out["ResponseMetadata"]["RetryAttempts"] >= 1, "RetryAttempts = %d" % out["ResponseMetadata"]["RetryAttempts"])
    check(len(seen) == 2 and seen[0] == (403, "RequestThrottled") and seen[1][0] == 200,
          "attempts: %r" % (seen,))

    got = consumer.receive_message(QueueUrl=url, WaitTimeSeconds=5).get("Messages", [])
    check(len(got) == 1 and got[0]["Body"] == "second", "the queue holds the retried message")

    # Without retries the refusal reaches the caller as RequestThrottled.
    try:
        consumer.send_message(QueueUrl=url, MessageBody="third")
        check(False, "a send to a full queue without retries succeeded")
    except botocore.exceptions.ClientError as e:
        err = e.response["Error"]
        check(e.response["ResponseMetadata"]["HTTPStatusCode"] == 403 and err["Code"] == "RequestThrottled"
              and "full" in err["Message"], "without retries: %r" % (err,))
    producer.delete_queue(QueueUrl=url)
    print("attempts=%d statuses=%s codes=%s" % (len(seen), ",".join(str(s) for s, _ in seen),
                                                ",".join(str(c) for _, c in seen)))


if __name__ == "__main__":
    main()
