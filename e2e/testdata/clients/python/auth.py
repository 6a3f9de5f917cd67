#!/usr/bin/env python3
"""Authentication against a sluice broker with access keys, through boto3
(the credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY). Run
by e2e/clients_auth_test.go with Debian's boto3 (query protocol) and with a
newer boto3 (AWS JSON).

usage: auth.py ENDPOINT PREFIX EXPECT
  EXPECT is "ok" (every call must succeed) or an error code (the first call
  must fail with it).
Prints one line per step; exits 1 with the reason on a surprise.
"""
import sys

import boto3
import botocore
from botocore.exceptions import ClientError


def main():
    endpoint, prefix, expect = sys.argv[1:]
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
    proto = sqs.meta.service_model.protocol
    print("boto3", boto3.__version__, "botocore", botocore.__version__, "protocol", proto, flush=True)
    try:
        url = sqs.create_queue(QueueName=prefix + "-auth")["QueueUrl"]
    except ClientError as e:
        code = e.response["Error"]["Code"]
        status = e.response["ResponseMetadata"]["HTTPStatusCode"]
        if code == expect:
            print("refused as expected:", code, status, flush=True)
            return 0
        print("FAIL: CreateQueue answered", code, status, e, flush=True)
        return 1
    if expect != "ok":
        print("FAIL: CreateQueue succeeded, want", expect, flush=True)
        return 1
    sqs.send_message(QueueUrl=url, MessageBody="signed hello")
    msgs = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1).get("Messages", [])
    if len(msgs) != 1 or msgs[0]["Body"] != "signed hello":
        print("FAIL: received", msgs, flush=True)
        return 1
    sqs.delete_message(QueueUrl=url, ReceiptHandle=msgs[0]["ReceiptHandle"])
    ident = boto3.client("sts", endpoint_url=endpoint, region_name="us-east-1").get_caller_identity()
    print("ok: send, receive, delete; caller", ident["Account"], ident["Arn"], flush=True)
    if ident["Account"] != "123456789012":
        print("FAIL: GetCallerIdentity account", ident["Account"], flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
