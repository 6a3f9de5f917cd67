#!/usr/bin/python3
"""Provokes SQS errors through boto3 (Debian's, query protocol) and prints,
for each case, the error code botocore parsed, the modeled exception class it
raised, and the HTTP status, as one JSON object. Run by
e2e/clients_errors_test.go, which holds the expected answers.

usage: errors.py ENDPOINT PREFIX
"""
import json
import sys

import boto3
import botocore
from botocore.config import Config


def main():
    endpoint, prefix = sys.argv[1:]
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="AKIDERR", aws_secret_access_key="secret",
                       config=Config(retries={"max_attempts": 1}))
    url = sqs.create_queue(QueueName=prefix + "-q", Attributes={"VisibilityTimeout": "30"})["QueueUrl"]
    missing = url.rsplit("/", 1)[0] + "/" + prefix + "-missing"
    sent = sqs.send_message(QueueUrl=url, MessageBody="x")
    got = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=5)["Messages"][0]
    sqs.delete_message(QueueUrl=url, ReceiptHandle=got["ReceiptHandle"])

    cases = {
        "get-queue-url-missing": lambda: sqs.get_queue_url(QueueName=prefix + "-missing"),
        "send-to-missing-queue": lambda: sqs.send_message(QueueUrl=missing, MessageBody="x"),
        "queue-name-exists": lambda: sqs.create_queue(QueueName=prefix + "-q", Attributes={"VisibilityTimeout": "31"}),
        "receipt-handle-invalid": lambda: sqs.delete_message(QueueUrl=url, ReceiptHandle="not-a-receipt-handle"),
        "batch-ids-not-distinct": lambda: sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "a", "MessageBody": "1"}, {"Id": "a", "MessageBody": "2"}]),
        "too-many-entries": lambda: sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "e%d" % i, "MessageBody": "x"} for i in range(11)]),
        "invalid-batch-entry-id": lambda: sqs.send_message_batch(QueueUrl=url, Entries=[
            {"Id": "bad id!", "MessageBody": "x"}]),
        "invalid-attribute-name": lambda: sqs.create_queue(QueueName=prefix + "-attr", Attributes={"NoSuchAttribute": "1"}),
        "invalid-attribute-value": lambda: sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "99999"}),
        "invalid-queue-name": lambda: sqs.create_queue(QueueName="bad name!"),
        "invalid-message-contents": lambda: sqs.send_message(QueueUrl=url, MessageBody="bad \x00 body"),
        "delete-queue-missing": lambda: sqs.delete_queue(QueueUrl=missing),
        "receive-from-missing-queue": lambda: sqs.receive_message(QueueUrl=missing),
    }
    out = {}
    for name, call in cases.items():
        try:
            call()
            out[name] = {"code": "", "exception": "", "status": 200}
        except botocore.exceptions.ClientError as e:
            out[name] = {
                "code": e.response["Error"]["Code"],
                "exception": type(e).__name__,
                "status": e.response["ResponseMetadata"]["HTTPStatusCode"],
                "senderFault": e.response["Error"].get("Type", ""),
            }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
