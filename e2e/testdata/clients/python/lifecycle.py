#!/usr/bin/python3
"""One part of a message's life, driven through boto3 against a sluice broker.

Run by e2e/clients_python_test.go under Debian's /usr/bin/python3, whose
python3-boto3 1.26 / python3-botocore 1.29 speak the SQS *query* protocol.

usage: lifecycle.py ENDPOINT PART PREFIX
  PART is standard-lifecycle, standard-redrive, standard-move, fifo-lifecycle,
  fifo-redrive or fifo-move; PREFIX makes the queue names unique.
Prints one line per step; exits 1 with the reason on the first failure.

botocore does not validate SQS's MD5 digests (it has no such handler), so this
script checks MD5OfMessageBody and MD5OfMessageAttributes itself, the way
the Java and Go SDKs do.
"""
import json
import sys
import threading
import time
import traceback
import urllib.request
import xml.etree.ElementTree as ET

import boto3
import botocore
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

from sqsmd5 import md5_attributes, md5_hex  # beside this script


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)
    print("ok:", what, flush=True)




ATTRS = {
    "trace": {"DataType": "String", "StringValue": "trace-\u00e9\u6f22"},
    "count": {"DataType": "Number", "StringValue": "42"},
    "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff"},
    "kind": {"DataType": "String.custom", "StringValue": "custom type"},
}


class Life:
    def __init__(self, endpoint, part, prefix):
        self.kind, self.what = part.split("-", 1)
        self.fifo = self.kind == "fifo"
        self.prefix = prefix
        self.endpoint = endpoint
        self.sqs = boto3.client(
            "sqs",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="AKIDBOTO3",
            aws_secret_access_key="secret",
            config=Config(read_timeout=40, connect_timeout=5, retries={"max_attempts": 3}),
        )

    # --- helpers

    def name(self, base):
        return self.prefix + "-" + base + (".fifo" if self.fifo else "")

    def create(self, base, **attrs):
        attrs = {k: str(v) for k, v in attrs.items()}
        if self.fifo:
            attrs["FifoQueue"] = "true"
        name = self.name(base)
        url = self.sqs.create_queue(QueueName=name, Attributes=attrs)["QueueUrl"]
        check(url.endswith("/" + name), "CreateQueue %s -> %s" % (name, url))
        check(self.sqs.get_queue_url(QueueName=name)["QueueUrl"] == url, "GetQueueUrl %s" % name)
        return url

    def arn(self, url):
        return self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def fifo_args(self, group, dedup):
        return {"MessageGroupId": group, "MessageDeduplicationId": dedup} if self.fifo else {}

    def send(self, url, body, attrs=ATTRS, group="g1", dedup=None):
        out = self.sqs.send_message(QueueUrl=url, MessageBody=body, MessageAttributes=attrs,
                                    **self.fifo_args(group, dedup or body))
        check(out["MD5OfMessageBody"] == md5_hex(body), "SendMessage MD5OfMessageBody of %r" % body)
        check(out.get("MD5OfMessageAttributes") == md5_attributes(attrs), "SendMessage MD5OfMessageAttributes")
        if self.fifo:
            check(out.get("SequenceNumber", "").isdigit(), "SendMessage SequenceNumber %r" % out.get("SequenceNumber"))
        return out["MessageId"]

    def receive(self, url, wait=5, max_n=10, visibility=None):
        kw = {"VisibilityTimeout": visibility} if visibility is not None else {}
        out = self.sqs.receive_message(QueueUrl=url, WaitTimeSeconds=wait, MaxNumberOfMessages=max_n,
                                       MessageAttributeNames=["All"], AttributeNames=["All"], **kw)
        msgs = out.get("Messages", [])
        for m in msgs:
            check(m["MD5OfBody"] == md5_hex(m["Body"]), "ReceiveMessage MD5OfBody of %r" % m["Body"])
            if m.get("MessageAttributes"):
                check(m.get("MD5OfMessageAttributes") == md5_attributes(m["MessageAttributes"]),
                      "ReceiveMessage MD5OfMessageAttributes of %r" % m["Body"])
        return msgs

    def receive_all(self, url, n, wait=5, deadline_s=30):
        got = []
        deadline = time.monotonic() + deadline_s
        while len(got) < n:
            if time.monotonic() > deadline:
                raise Failed("received %d of %d messages within %ds" % (len(got), n, deadline_s))
            got += self.receive(url, wait=wait)
        check(len(got) == n, "received %d messages" % n)
        return got

    def counts(self, url):
        a = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        return int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"])

    def expect_empty(self, url, what):
        t0 = time.monotonic()
        msgs = self.receive(url, wait=1)
        check(msgs == [], "%s: a 1 s long poll returns nothing (got %r)" % (what, [m["Body"] for m in msgs]))
        check(time.monotonic() - t0 >= 0.8, "%s: the empty long poll waited about 1 s" % what)

    def raw_query(self, action, **params):
        """Sends a query-protocol request signed by botocore's SigV4 signer and
        returns {local tag name: [text, ...]} of the XML answer. For the
        actions botocore 1.29's model predates (the 2023 move-task API)."""
        params = dict(Action=action, Version="2012-11-05", **params)
        req = AWSRequest(method="POST", url=self.endpoint + "/", data=params,
                         headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"})
        SigV4Auth(Credentials("AKIDBOTO3", "secret"), "sqs", "us-east-1").add_auth(req)
        p = req.prepare()
        body = p.body.encode() if isinstance(p.body, str) else p.body
        try:
            with urllib.request.urlopen(urllib.request.Request(p.url, data=body, headers=dict(p.headers), method="POST"), timeout=30) as r:
                root = ET.fromstring(r.read())
        except urllib.error.HTTPError as e:
            raise Failed("%s answered HTTP %d: %s" % (action, e.code, e.read()[:500]))
        out = {}
        for el in root.iter():
            out.setdefault(el.tag.split("}")[-1], []).append(el.text)
        return out

    def start_move_task(self, source_arn):
        if hasattr(self.sqs, "start_message_move_task"):
            return self.sqs.start_message_move_task(SourceArn=source_arn)["TaskHandle"]
        return self.raw_query("StartMessageMoveTask", SourceArn=source_arn)["TaskHandle"][0]

    def list_move_tasks(self, source_arn):
        if hasattr(self.sqs, "list_message_move_tasks"):
            return self.sqs.list_message_move_tasks(SourceArn=source_arn).get("Results", [])
        x = self.raw_query("ListMessageMoveTasks", SourceArn=source_arn)
        n = len(x.get("ListMessageMoveTasksResultEntry", []))
        return [{"Status": x["Status"][i], "SourceArn": x["SourceArn"][i],
                 "ApproximateNumberOfMessagesMoved": int(x["ApproximateNumberOfMessagesMoved"][i])} for i in range(n)]

    # --- parts

    def lifecycle(self):
        url = self.create("life", VisibilityTimeout=30, ReceiveMessageWaitTimeSeconds=0)
        a = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        check(a["VisibilityTimeout"] == "30", "queue attribute VisibilityTimeout")
        check(a["QueueArn"].endswith(":" + self.name("life")), "queue attribute QueueArn")
        if self.fifo:
            check(a.get("FifoQueue") == "true", "queue attribute FifoQueue")
        self.expect_empty(url, "new queue")

        # A long poll started before the send returns the message as soon as it is sent.
        result = {}

        def poll():
            try:
                t0 = time.monotonic()
                result["msgs"] = self.receive(url, wait=20, max_n=1)
                result["took"] = time.monotonic() - t0
            except Exception as e:  # reported by the main thread
                result["err"] = e

        th = threading.Thread(target=poll)
        th.start()
        mid = self.send(url, "single body", dedup="d1")
        th.join(30)
        check(not th.is_alive(), "the long poll returned")
        if "err" in result:
            raise result["err"]
        msgs = result["msgs"]
        check(len(msgs) == 1 and msgs[0]["MessageId"] == mid, "the long poll got the sent message")
        check(result["took"] < 15, "the long poll returned in %.1fs, before its 20 s wait" % result["took"])
        m = msgs[0]
        check(m["Body"] == "single body", "body round trip")
        check(m["MessageAttributes"]["trace"]["StringValue"] == ATTRS["trace"]["StringValue"], "String attribute round trip")
        check(m["MessageAttributes"]["count"] == {"DataType": "Number", "StringValue": "42"}, "Number attribute round trip")
        check(m["MessageAttributes"]["blob"]["BinaryValue"] == ATTRS["blob"]["BinaryValue"], "Binary attribute round trip")
        check(m["MessageAttributes"]["kind"]["DataType"] == "String.custom", "custom type round trip")
        sa = m["Attributes"]
        check(sa["ApproximateReceiveCount"] == "1", "ApproximateReceiveCount 1")
        check(sa["SenderId"] != "" and sa["SentTimestamp"].isdigit(), "SenderId and SentTimestamp")
        if self.fifo:
            check(sa.get("MessageGroupId") == "g1" and sa.get("MessageDeduplicationId") == "d1", "FIFO system attributes")
            check(sa.get("SequenceNumber", "").isdigit(), "FIFO SequenceNumber on receive")
        check(self.counts(url) == (0, 1), "counts while leased: 0 visible, 1 in flight")

        # Shorten the lease to 1 s: a long poll gets the message back when it ends.
        self.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=1)
        msgs = self.receive(url, wait=10, max_n=1)
        check(len(msgs) == 1 and msgs[0]["MessageId"] == mid, "redelivered after ChangeMessageVisibility 1")
        check(msgs[0]["Attributes"]["ApproximateReceiveCount"] == "2", "ApproximateReceiveCount 2")
        # The first receipt handle is stale now; the new one deletes.
        self.sqs.delete_message(QueueUrl=url, ReceiptHandle=msgs[0]["ReceiptHandle"])
        check(self.counts(url) == (0, 0), "DeleteMessage removed it")

        if self.fifo:
            dup = self.send(url, "single body", dedup="d1")
            check(dup == mid, "a duplicate send inside the dedup window answers the first MessageId")
            self.expect_empty(url, "after a deduplicated send")

        # Batch send, batch change visibility, batch delete.
        entries = []
        for i in range(3):
            e = {"Id": "e%d" % i, "MessageBody": "batch body %d" % i,
                 "MessageAttributes": {"index": {"DataType": "Number", "StringValue": str(i)}, **ATTRS}}
            if self.fifo:
                e.update(MessageGroupId="g2", MessageDeduplicationId="b%d" % i)
            entries.append(e)
        out = self.sqs.send_message_batch(QueueUrl=url, Entries=entries)
        check(len(out.get("Successful", [])) == 3 and not out.get("Failed"), "SendMessageBatch: 3 successful")
        for s in out["Successful"]:
            e = entries[int(s["Id"][1:])]
            check(s["MD5OfMessageBody"] == md5_hex(e["MessageBody"]), "batch entry %s MD5OfMessageBody" % s["Id"])
            check(s["MD5OfMessageAttributes"] == md5_attributes(e["MessageAttributes"]), "batch entry %s MD5OfMessageAttributes" % s["Id"])
        got = self.receive_all(url, 3)
        bodies = [m["Body"] for m in got]
        if self.fifo:
            check(bodies == ["batch body 0", "batch body 1", "batch body 2"], "FIFO order within the group: %r" % bodies)
        else:
            check(sorted(bodies) == ["batch body 0", "batch body 1", "batch body 2"], "all batch bodies")
        out = self.sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
            {"Id": "v%d" % i, "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for i, m in enumerate(got)])
        check(len(out.get("Successful", [])) == 3 and not out.get("Failed"), "ChangeMessageVisibilityBatch: 3 successful")
        got = self.receive_all(url, 3)
        out = self.sqs.delete_message_batch(QueueUrl=url, Entries=[
            {"Id": "d%d" % i, "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(got)])
        check(len(out.get("Successful", [])) == 3 and not out.get("Failed"), "DeleteMessageBatch: 3 successful")
        check(self.counts(url) == (0, 0), "queue empty after the batch delete")
        self.expect_empty(url, "after the batch delete")

        self.sqs.delete_queue(QueueUrl=url)
        try:
            self.sqs.get_queue_url(QueueName=self.name("life"))
            raise Failed("GetQueueUrl of a deleted queue succeeded")
        except self.sqs.exceptions.QueueDoesNotExist:
            check(True, "DeleteQueue: GetQueueUrl answers QueueDoesNotExist")

    def redrive(self):
        """Send one message to a queue whose RedrivePolicy has maxReceiveCount 1,
        receive it, end its lease; the next receive moves it to the DLQ.
        Returns (source url, dlq url, message id, body); the message is visible in the DLQ."""
        dlq = self.create("dlq")
        dlq_arn = self.arn(dlq)
        src = self.create("src", VisibilityTimeout=30,
                          RedrivePolicy=json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1}))
        a = self.sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["RedrivePolicy"])["Attributes"]
        rp = json.loads(a["RedrivePolicy"])
        check(rp["deadLetterTargetArn"] == dlq_arn and int(rp["maxReceiveCount"]) == 1, "RedrivePolicy round trip: %s" % a["RedrivePolicy"])
        body = "poison " + self.prefix
        mid = self.send(src, body, dedup="p1")
        msgs = self.receive(src, wait=5)
        check(len(msgs) == 1 and msgs[0]["MessageId"] == mid, "first receive from the source")
        self.sqs.change_message_visibility(QueueUrl=src, ReceiptHandle=msgs[0]["ReceiptHandle"], VisibilityTimeout=0)
        msgs = self.receive(src, wait=1)
        check(msgs == [], "second receive moves the message to the DLQ instead of returning it")
        msgs = self.receive(dlq, wait=5)
        check(len(msgs) == 1 and msgs[0]["MessageId"] == mid and msgs[0]["Body"] == body, "the message is in the DLQ")
        check(msgs[0]["MessageAttributes"]["trace"]["StringValue"] == ATTRS["trace"]["StringValue"], "attributes kept in the DLQ")
        check(msgs[0]["Attributes"].get("DeadLetterQueueSourceArn") == self.arn(src), "DeadLetterQueueSourceArn")
        self.sqs.change_message_visibility(QueueUrl=dlq, ReceiptHandle=msgs[0]["ReceiptHandle"], VisibilityTimeout=0)
        check(self.counts(src) == (0, 0), "source empty")
        return src, dlq, mid, body

    def move(self):
        src, dlq, mid, body = self.redrive()
        dlq_arn = self.arn(dlq)
        srcs = self.sqs.list_dead_letter_source_queues(QueueUrl=dlq).get("queueUrls", [])
        check(srcs == [src], "ListDeadLetterSourceQueues: %r" % srcs)
        if not hasattr(self.sqs, "start_message_move_task"):
            print("note: botocore %s has no StartMessageMoveTask/ListMessageMoveTasks (added to SQS in 2023); "
                  "sending them as query requests signed by botocore's SigV4 signer" % botocore.__version__, file=sys.stderr, flush=True)
        handle = self.start_move_task(dlq_arn)
        check(handle != "", "StartMessageMoveTask answered a TaskHandle")
        deadline = time.monotonic() + 30
        while True:
            tasks = self.list_move_tasks(dlq_arn)
            check(len(tasks) >= 1, "ListMessageMoveTasks lists the task")
            t = tasks[0]
            if t["Status"] == "COMPLETED":
                break
            if t["Status"] not in ("RUNNING", "CANCELLING") or time.monotonic() > deadline:
                raise Failed("move task status %r after %.0fs: %r" % (t["Status"], 30 - (deadline - time.monotonic()), t))
            time.sleep(0.1)  # polling a status with a deadline
        check(t["ApproximateNumberOfMessagesMoved"] == 1, "the task moved 1 message: %r" % t)
        check(t["SourceArn"] == dlq_arn, "task SourceArn")
        msgs = self.receive(src, wait=5)
        check(len(msgs) == 1 and msgs[0]["Body"] == body, "the message is back in the source queue")
        check(msgs[0]["MessageAttributes"]["count"]["StringValue"] == "42", "attributes kept by the move")
        self.sqs.delete_message(QueueUrl=src, ReceiptHandle=msgs[0]["ReceiptHandle"])
        check(self.counts(dlq) == (0, 0), "DLQ empty after the move")


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    endpoint, part, prefix = sys.argv[1:]
    print("boto3", boto3.__version__, "botocore", botocore.__version__, "part", part, flush=True)
    life = Life(endpoint, part, prefix)
    try:
        getattr(life, life.what)()
    except Exception:
        traceback.print_exc()
        print("FAILED:", part, file=sys.stderr)
        return 1
    print("PASSED:", part, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
