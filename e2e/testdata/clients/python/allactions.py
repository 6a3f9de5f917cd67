#!/usr/bin/env python3
"""Calls every one of the 23 SQS actions through boto3 and audits each parsed
response against the client's own service model: every output member the
model defines for the action must be present and of the model's type, unless
SQS would leave it out for that call (listed per call below). Run by
e2e/clients_allactions_test.go in two flavours:

  query: Debian's /usr/bin/python3 (python3-boto3 1.26 / botocore 1.29, whose
         model speaks the query protocol). That model predates the 2023
         move-task actions, so this script adds StartMessageMoveTask,
         ListMessageMoveTasks and CancelMessageMoveTask to it in the query
         form of the last query-protocol model (botocore 1.34.89:
         <Op>Result wrappers, flattened <ListMessageMoveTasksResultEntry>).
  json:  a newer boto3 (>= 1.34.90, the AWS JSON 1.0 protocol).

usage: allactions.py ENDPOINT PROTOCOL PREFIX
Prints one JSON object: {"protocol", "botocore", "actions": {Action: {"calls",
"seen", "problems"}}, "errors": {case: {"code", "queryCode", "exception",
"status"}}, "fatal"}.
"""
import base64
import copy
import datetime
import json
import os
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET

import botocore
import botocore.session
from botocore.config import Config

from sqsmd5 import md5_attributes, md5_hex  # beside this script

# The move-task actions in the query form of botocore 1.34.89's model.
MOVE_TASK_OPERATIONS = {
    "StartMessageMoveTask": {
        "name": "StartMessageMoveTask", "http": {"method": "POST", "requestUri": "/"},
        "input": {"shape": "StartMessageMoveTaskRequest"},
        "output": {"shape": "StartMessageMoveTaskResult", "resultWrapper": "StartMessageMoveTaskResult"},
        "errors": [{"shape": "ResourceNotFoundException"}, {"shape": "UnsupportedOperation"}],
    },
    "ListMessageMoveTasks": {
        "name": "ListMessageMoveTasks", "http": {"method": "POST", "requestUri": "/"},
        "input": {"shape": "ListMessageMoveTasksRequest"},
        "output": {"shape": "ListMessageMoveTasksResult", "resultWrapper": "ListMessageMoveTasksResult"},
        "errors": [{"shape": "ResourceNotFoundException"}, {"shape": "UnsupportedOperation"}],
    },
    "CancelMessageMoveTask": {
        "name": "CancelMessageMoveTask", "http": {"method": "POST", "requestUri": "/"},
        "input": {"shape": "CancelMessageMoveTaskRequest"},
        "output": {"shape": "CancelMessageMoveTaskResult", "resultWrapper": "CancelMessageMoveTaskResult"},
        "errors": [{"shape": "ResourceNotFoundException"}, {"shape": "UnsupportedOperation"}],
    },
}
MOVE_TASK_SHAPES = {
    "MtString": {"type": "string"},
    "MtInteger": {"type": "integer"},
    "MtLong": {"type": "long"},
    "StartMessageMoveTaskRequest": {"type": "structure", "required": ["SourceArn"], "members": {
        "SourceArn": {"shape": "MtString"}, "DestinationArn": {"shape": "MtString"},
        "MaxNumberOfMessagesPerSecond": {"shape": "MtInteger"}}},
    "StartMessageMoveTaskResult": {"type": "structure", "members": {"TaskHandle": {"shape": "MtString"}}},
    "ListMessageMoveTasksRequest": {"type": "structure", "required": ["SourceArn"], "members": {
        "SourceArn": {"shape": "MtString"}, "MaxResults": {"shape": "MtInteger"}}},
    "ListMessageMoveTasksResult": {"type": "structure", "members": {
        "Results": {"shape": "ListMessageMoveTasksResultEntryList"}}},
    "ListMessageMoveTasksResultEntryList": {"type": "list", "flattened": True, "member": {
        "shape": "ListMessageMoveTasksResultEntry", "locationName": "ListMessageMoveTasksResultEntry"}},
    "ListMessageMoveTasksResultEntry": {"type": "structure", "members": {
        "TaskHandle": {"shape": "MtString"}, "Status": {"shape": "MtString"},
        "SourceArn": {"shape": "MtString"}, "DestinationArn": {"shape": "MtString"},
        "MaxNumberOfMessagesPerSecond": {"shape": "MtInteger"},
        "ApproximateNumberOfMessagesMoved": {"shape": "MtLong"},
        "ApproximateNumberOfMessagesToMove": {"shape": "MtLong"},
        "FailureReason": {"shape": "MtString"}, "StartedTimestamp": {"shape": "MtLong"}}},
    "CancelMessageMoveTaskRequest": {"type": "structure", "required": ["TaskHandle"], "members": {
        "TaskHandle": {"shape": "MtString"}}},
    "CancelMessageMoveTaskResult": {"type": "structure", "members": {
        "ApproximateNumberOfMessagesMoved": {"shape": "MtLong"}}},
    "ResourceNotFoundException": {"type": "structure", "members": {}, "exception": True,
                                  "error": {"code": "ResourceNotFoundException", "httpStatusCode": 404,
                                            "senderFault": True}},
}


def add_move_tasks(session):
    """Writes the Debian model plus the move-task actions into a data path that
    the session's loader searches first."""
    loader = session.get_component("data_loader")
    model = copy.deepcopy(loader.load_service_model("sqs", "service-2", "2012-11-05"))
    for name, op in MOVE_TASK_OPERATIONS.items():
        model["operations"].setdefault(name, op)
    for name, shape in MOVE_TASK_SHAPES.items():
        model["shapes"].setdefault(name, shape)
    root = tempfile.mkdtemp(prefix="sqs-model-")
    d = os.path.join(root, "sqs", "2012-11-05")
    os.makedirs(d)
    with open(os.path.join(d, "service-2.json"), "w") as f:
        json.dump(model, f)
    session = botocore.session.get_session()
    session.get_component("data_loader").search_paths.insert(0, root)
    return session




ATTRS = {
    "str": {"DataType": "String", "StringValue": "caf\u00e9 \u6f22"},
    "num": {"DataType": "Number", "StringValue": "-12.5e3"},
    "bin": {"DataType": "Binary", "BinaryValue": b"\x00\x01\xfe\xff"},
    "str.label": {"DataType": "String.label", "StringValue": "labelled"},
    "num-int": {"DataType": "Number.int", "StringValue": "42"},
    "bin_png": {"DataType": "Binary.png", "BinaryValue": b"\x89PNG"},
}
TRACE = {"AWSTraceHeader": {"DataType": "String",
                            "StringValue": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"}}
TRACE_MD5 = "5ae4d5d7636402d80f4eb6d213245a88"

TYPES = {"string": (str,), "integer": (int,), "long": (int,), "boolean": (bool,), "blob": (bytes,),
         "double": (float,), "float": (float,), "timestamp": (datetime.datetime,)}

# Members of an attribute value SQS never returns: "Not implemented. Reserved for future use."
RESERVED = ("StringListValues", "BinaryListValues")


class Audit:
    def __init__(self, sqs, protocol):
        self.sqs = sqs
        self.protocol = protocol
        self.model = sqs.meta.service_model
        self.actions = {}
        self.raw = None
        sqs.meta.events.register("after-call.sqs", self.keep_raw)

    def keep_raw(self, http_response=None, model=None, **kwargs):
        self.raw = (model.name, http_response.status_code, http_response.content)

    def rec(self, op):
        return self.actions.setdefault(op, {"calls": 0, "seen": [], "problems": []})

    def problem(self, op, msg):
        self.rec(op)["problems"].append(msg)

    def expect(self, op, cond, msg):
        if not cond:
            self.problem(op, msg)

    def call(self, op, opt=(), none=(), empty=(), **kw):
        """Calls op and audits its response. opt are member paths SQS may leave
        out for this call; none are paths it must leave out; empty are lists
        that are empty in this call: present as [] in JSON, absent in the
        query protocol (XML cannot tell an empty flattened list from none).
        A path names list items with [] and map values with {}:
        Messages[].MessageAttributes{}.StringValue."""
        resp = getattr(self.sqs, botocore.xform_name(op))(**kw)
        r = self.rec(op)
        r["calls"] += 1
        body = {k: v for k, v in resp.items() if k != "ResponseMetadata"}
        self.expect(op, resp.get("ResponseMetadata", {}).get("RequestId"), "no RequestId in %r" % resp.get("ResponseMetadata"))
        if self.raw and self.raw[0] == op:
            self.audit_raw(op, self.raw[2])
        else:
            self.problem(op, "no raw response captured")
        out = self.model.operation_model(op).output_shape
        if out is None:
            self.expect(op, body == {}, "%s has no output in the model but the response parsed to %r" % (op, body))
            return resp
        seen = set(r["seen"])
        for p in empty:
            if self.protocol == "json":
                self.expect(op, body.get(p) == [], "%s = %r, want [] (the call's list is empty)" % (p, body.get(p)))
            elif p in body:
                self.problem(op, "%s = %r is present; XML has no elements for an empty list" % (p, body[p]))
        opt = set(opt) | (set(empty) if self.protocol == "query" else set())
        self.walk(op, out, body, "", opt, set(none), seen)
        r["seen"] = sorted(seen)
        return resp

    def audit_raw(self, op, content):
        """Checks the raw body for names the model does not define, which
        botocore's parsers would drop without a word."""
        out = self.model.operation_model(op).output_shape
        if self.protocol == "json":
            if out is None:
                self.expect(op, content == b"", "%s has no output: the body should be empty, got %r" % (op, content[:200]))
                return
            try:
                self.raw_json(op, out, json.loads(content), "")
            except ValueError as e:
                self.problem(op, "body is not JSON: %s: %r" % (e, content[:200]))
            return
        try:
            root = ET.fromstring(content)
        except ET.ParseError as e:
            self.problem(op, "body is not XML: %s: %r" % (e, content[:200]))
            return
        ns = "{http://queue.amazonaws.com/doc/2012-11-05/}"
        self.expect(op, root.tag == ns + op + "Response", "root element %s" % root.tag)
        want = ([ns + op + "Result"] if out is not None else []) + [ns + "ResponseMetadata"]
        got = [c.tag for c in root]
        # An output whose members are all absent may come as <OpResult/> or not at all.
        if out is not None and got == want[1:]:
            got = want
        self.expect(op, got == want, "children of %s: %r, want %r" % (root.tag, got, want))
        md = root.find(ns + "ResponseMetadata/" + ns + "RequestId")
        self.expect(op, md is not None and md.text, "no ResponseMetadata/RequestId")
        result = root.find(ns + op + "Result")
        if out is not None and result is not None:
            self.raw_xml(op, out, result, op + "Result", ns)

    def raw_json(self, op, shape, v, path):
        t = shape.type_name
        if t == "structure" and isinstance(v, dict):
            for k, item in v.items():
                if k not in shape.members:
                    self.problem(op, "raw JSON key %s.%s is not a member of %s" % (path or "(output)", k, shape.name))
                else:
                    self.raw_json(op, shape.members[k], item, (path + "." if path else "") + k)
        elif t == "list" and isinstance(v, list):
            for item in v:
                self.raw_json(op, shape.member, item, path + "[]")
        elif t == "map" and isinstance(v, dict):
            for item in v.values():
                self.raw_json(op, shape.value, item, path + "{}")

    def raw_xml(self, op, shape, el, path, ns):
        """el is the element of a structure: each child must be the XML name of
        one of its members."""
        names = {}
        for name, ms in shape.members.items():
            xn = ms.serialization.get("name", name)
            if ms.type_name in ("list", "map") and ms.serialization.get("flattened"):
                if ms.type_name == "list":
                    xn = ms.member.serialization.get("name", xn)
            names[xn] = ms
        for c in el:
            tag = c.tag[len(ns):] if c.tag.startswith(ns) else c.tag
            ms = names.get(tag)
            if ms is None:
                self.problem(op, "raw XML element %s/%s is not a member of %s (want one of %s)"
                             % (path, tag, shape.name, sorted(names)))
                continue
            p = path + "/" + tag
            if ms.type_name == "structure":
                self.raw_xml(op, ms, c, p, ns)
            elif ms.type_name == "list":
                item = ms.member
                if ms.serialization.get("flattened"):
                    if item.type_name == "structure":
                        self.raw_xml(op, item, c, p, ns)
                else:
                    iname = item.serialization.get("name", "member")
                    for i in c:
                        self.expect(op, i.tag == ns + iname, "raw XML %s has item %s, want %s" % (p, i.tag, iname))
            elif ms.type_name == "map":
                kn = ms.key.serialization.get("name", "key")
                vn = ms.value.serialization.get("name", "value")
                kids = [i.tag[len(ns):] for i in c]
                self.expect(op, kids[:1] == [kn] and kids[1:] == [vn], "raw XML map entry %s: %r, want [%s, %s]" % (p, kids, kn, vn))
                v = c.find(ns + vn)
                if v is not None and ms.value.type_name == "structure":
                    self.raw_xml(op, ms.value, v, p + "/" + vn, ns)
            else:
                self.expect(op, len(c) == 0, "raw XML %s is a scalar but has children" % p)

    def walk(self, op, shape, v, path, opt, none, seen):
        t = shape.type_name
        where = path or "(output)"
        if t == "structure":
            if not isinstance(v, dict):
                self.problem(op, "%s: want a structure, got %r" % (where, v))
                return
            for name, ms in shape.members.items():
                p = path + "." + name if path else name
                if name in v:
                    seen.add(p)
                    if p in none:
                        self.problem(op, "%s = %r is present; SQS leaves it out here" % (p, v[name]))
                    self.walk(op, ms, v[name], p, opt, none, seen)
                elif p not in opt and p not in none:
                    self.problem(op, "%s is missing" % p)
            for name in v:
                if name not in shape.members:
                    self.problem(op, "%s.%s is not in the model" % (where, name))
        elif t == "list":
            if not isinstance(v, list):
                self.problem(op, "%s: want a list, got %r" % (where, v))
                return
            for item in v:
                self.walk(op, shape.member, item, path + "[]", opt, none, seen)
        elif t == "map":
            if not isinstance(v, dict):
                self.problem(op, "%s: want a map, got %r" % (where, v))
                return
            for k, item in v.items():
                self.expect(op, isinstance(k, str), "%s: key %r is not a string" % (where, k))
                self.walk(op, shape.value, item, path + "{}", opt, none, seen)
        else:
            want = TYPES.get(t, (object,))
            ok = isinstance(v, want) and not (bool not in want and isinstance(v, bool))
            self.expect(op, ok, "%s: model type %s, got %s %r" % (where, t, type(v).__name__, v))

    def error(self, fn):
        try:
            fn()
            return {"code": "", "queryCode": "", "exception": "", "status": 200}
        except botocore.exceptions.ParamValidationError as e:
            return {"code": "", "queryCode": "", "exception": "ParamValidationError", "status": 0}
        except botocore.exceptions.ClientError as e:
            return {"code": e.response["Error"].get("Code", ""),
                    "type": e.response["Error"].get("Type", ""),
                    "hasMessage": bool(e.response["Error"].get("Message")),
                    "queryCode": e.response["Error"].get("QueryErrorCode", ""),
                    "exception": type(e).__name__,
                    "status": e.response["ResponseMetadata"]["HTTPStatusCode"]}


# Members of a received message's attribute value: StringValue or BinaryValue by type.
MSG_ATTR_OPT = ["Messages[].MessageAttributes{}." + m for m in ("StringValue", "BinaryValue")]
MSG_ATTR_NONE = ["Messages[].MessageAttributes{}." + m for m in RESERVED]
SEND_OPT_NONE = ["MD5OfMessageAttributes", "MD5OfMessageSystemAttributes", "SequenceNumber"]


def run(a, prefix):
    sqs = a.sqs
    P = prefix
    json_proto = a.protocol == "json"

    # --- queues
    std = a.call("CreateQueue", QueueName=P + "-std", Attributes={
        "VisibilityTimeout": "40", "DelaySeconds": "0", "MaximumMessageSize": "1024",
        "MessageRetentionPeriod": "3600", "ReceiveMessageWaitTimeSeconds": "0"},
        **{"tags": {"team": "sluice", "env": "test"}})["QueueUrl"]
    fifo = a.call("CreateQueue", QueueName=P + "-f.fifo", Attributes={
        "FifoQueue": "true", "ContentBasedDeduplication": "true"})["QueueUrl"]
    dlq = a.call("CreateQueue", QueueName=P + "-dlq")["QueueUrl"]
    dlq2 = a.call("CreateQueue", QueueName=P + "-dlq2")["QueueUrl"]

    def arn(url):
        return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    dlq_arn, dlq2_arn = arn(dlq), arn(dlq2)
    srcs = [a.call("CreateQueue", QueueName="%s-src%d" % (P, i), Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})["QueueUrl"]
        for i in (1, 2, 3)]
    a.call("CreateQueue", QueueName=P + "-src4", Attributes={
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq2_arn, "maxReceiveCount": 5})})

    got = a.call("GetQueueUrl", QueueName=P + "-std")["QueueUrl"]
    a.expect("GetQueueUrl", got == std, "GetQueueUrl %r, CreateQueue said %r" % (got, std))

    # ListQueues: without MaxResults no NextToken; with MaxResults pages of 3.
    all_urls = a.call("ListQueues", none=["NextToken"], QueueNamePrefix=P)["QueueUrls"]
    a.expect("ListQueues", len(all_urls) == 8, "ListQueues without MaxResults: %d urls, want 8" % len(all_urls))
    paged, tok, pages = [], None, 0
    while True:
        kw = {"QueueNamePrefix": P, "MaxResults": 3}
        if tok:
            kw["NextToken"] = tok
        last = len(paged) + 3 >= 8
        r = a.call("ListQueues", none=["NextToken"] if last else [], **kw)
        paged += r["QueueUrls"]
        pages += 1
        tok = r.get("NextToken")
        if not tok or pages > 5:
            break
    a.expect("ListQueues", pages == 3 and sorted(paged) == sorted(all_urls),
             "ListQueues pages of 3: %d pages, %r" % (pages, paged))

    attrs = a.call("GetQueueAttributes", QueueUrl=std, AttributeNames=["All"])["Attributes"]
    for k in ("QueueArn", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
              "ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp",
              "VisibilityTimeout", "MaximumMessageSize", "MessageRetentionPeriod", "DelaySeconds",
              "ReceiveMessageWaitTimeSeconds"):
        a.expect("GetQueueAttributes", isinstance(attrs.get(k), str), "attribute %s = %r" % (k, attrs.get(k)))
    fattrs = a.call("GetQueueAttributes", QueueUrl=fifo,
                    AttributeNames=["FifoQueue", "ContentBasedDeduplication", "VisibilityTimeout"])["Attributes"]
    a.expect("GetQueueAttributes", fattrs.get("FifoQueue") == "true" and fattrs.get("ContentBasedDeduplication") == "true"
             and fattrs.get("VisibilityTimeout") == "30", "FIFO attributes %r" % fattrs)
    a.call("SetQueueAttributes", QueueUrl=std, Attributes={"VisibilityTimeout": "45", "DelaySeconds": "0"})
    v = a.call("GetQueueAttributes", QueueUrl=std, AttributeNames=["VisibilityTimeout"])["Attributes"]
    a.expect("SetQueueAttributes", v == {"VisibilityTimeout": "45"}, "after SetQueueAttributes: %r" % v)

    # --- tags and permissions
    tags = a.call("ListQueueTags", QueueUrl=std)["Tags"]
    a.expect("ListQueueTags", tags == {"team": "sluice", "env": "test"}, "CreateQueue tags: %r" % tags)
    a.call("TagQueue", QueueUrl=std, Tags={"owner": "q\u00e9", "env": "prod"})
    a.call("UntagQueue", QueueUrl=std, TagKeys=["team"])
    tags = a.call("ListQueueTags", QueueUrl=std)["Tags"]
    a.expect("TagQueue", tags == {"owner": "q\u00e9", "env": "prod"}, "after Tag/Untag: %r" % tags)
    a.call("UntagQueue", QueueUrl=std, TagKeys=["owner", "env"])
    a.call("ListQueueTags", none=["Tags"], QueueUrl=std)

    a.call("AddPermission", QueueUrl=std, Label="p1", AWSAccountIds=["111122223333", "444455556666"],
           Actions=["SendMessage", "ReceiveMessage"])
    pol = sqs.get_queue_attributes(QueueUrl=std, AttributeNames=["Policy"]).get("Attributes", {}).get("Policy", "")
    a.expect("AddPermission", '"p1"' in pol and "111122223333" in pol and "444455556666" in pol
             and "SQS:SendMessage" in pol and "SQS:ReceiveMessage" in pol, "Policy after AddPermission: %r" % pol)
    a.call("RemovePermission", QueueUrl=std, Label="p1")
    pol = sqs.get_queue_attributes(QueueUrl=std, AttributeNames=["Policy"]).get("Attributes", {}).get("Policy", "")
    a.expect("RemovePermission", '"p1"' not in pol, "Policy after RemovePermission: %r" % pol)

    # --- sends
    body = "body \u00e9\r\n\t" + P
    r = a.call("SendMessage", none=["SequenceNumber"], QueueUrl=std, MessageBody=body,
               MessageAttributes=ATTRS, MessageSystemAttributes=TRACE)
    a.expect("SendMessage", r["MD5OfMessageBody"] == md5_hex(body), "MD5OfMessageBody %r" % r["MD5OfMessageBody"])
    a.expect("SendMessage", r["MD5OfMessageAttributes"] == md5_attributes(ATTRS), "MD5OfMessageAttributes %r" % r)
    a.expect("SendMessage", r.get("MD5OfMessageSystemAttributes") == TRACE_MD5, "MD5OfMessageSystemAttributes %r" % r)
    first_id = r["MessageId"]
    a.call("SendMessage", none=SEND_OPT_NONE, QueueUrl=std, MessageBody="plain", DelaySeconds=0)
    r = a.call("SendMessage", none=["MD5OfMessageAttributes", "MD5OfMessageSystemAttributes"], QueueUrl=fifo,
               MessageBody="fifo-1", MessageGroupId="g1")
    a.expect("SendMessage", r["SequenceNumber"].isdigit(), "FIFO SequenceNumber %r" % r["SequenceNumber"])

    big = "x" * 2000  # past the queue's MaximumMessageSize of 1024
    r = a.call("SendMessageBatch", opt=["Successful[]." + m for m in SEND_OPT_NONE[:2]],
               none=["Successful[].SequenceNumber"], QueueUrl=std, Entries=[
                   {"Id": "a1", "MessageBody": "batch-a", "MessageAttributes": ATTRS, "MessageSystemAttributes": TRACE},
                   {"Id": "b-2", "MessageBody": big},
                   {"Id": "c_3", "MessageBody": "batch-c", "DelaySeconds": 0}])
    ok = {e["Id"]: e for e in r["Successful"]}
    a.expect("SendMessageBatch", sorted(ok) == ["a1", "c_3"], "Successful ids %r" % sorted(ok))
    if "a1" in ok:
        a.expect("SendMessageBatch", ok["a1"].get("MD5OfMessageAttributes") == md5_attributes(ATTRS)
                 and ok["a1"].get("MD5OfMessageSystemAttributes") == TRACE_MD5
                 and ok["a1"]["MD5OfMessageBody"] == md5_hex("batch-a"), "entry a1 %r" % ok["a1"])
    if "c_3" in ok:
        a.expect("SendMessageBatch", "MD5OfMessageAttributes" not in ok["c_3"]
                 and "MD5OfMessageSystemAttributes" not in ok["c_3"], "entry c_3 has attribute MD5s: %r" % ok["c_3"])
    a.expect("SendMessageBatch", len(r["Failed"]) == 1 and r["Failed"][0]["Id"] == "b-2"
             and r["Failed"][0]["Code"] == "InvalidParameterValue" and r["Failed"][0]["SenderFault"] is True
             and "1024" in r["Failed"][0].get("Message", ""), "Failed %r" % r["Failed"])
    r = a.call("SendMessageBatch", none=["Successful[]." + m for m in SEND_OPT_NONE[:2]], QueueUrl=fifo, Entries=[
        {"Id": "f1", "MessageBody": "fifo-2", "MessageGroupId": "g1"},
        {"Id": "f2", "MessageBody": "fifo-3", "MessageGroupId": "g2", "MessageDeduplicationId": "d3"}], empty=["Failed"])
    seqs = [e["SequenceNumber"] for e in r["Successful"]]
    a.expect("SendMessageBatch", len(seqs) == 2 and len(set(seqs)) == 2, "FIFO batch %r" % r)

    # --- receives
    names = {"AttributeNames": ["All"]}
    if json_proto:
        names = {"MessageSystemAttributeNames": ["All"]}
    r = a.call("ReceiveMessage", opt=["Messages[].MessageAttributes", "Messages[].MD5OfMessageAttributes"] + MSG_ATTR_OPT,
               none=MSG_ATTR_NONE, QueueUrl=std, MessageAttributeNames=["All"], MaxNumberOfMessages=10,
               VisibilityTimeout=60, WaitTimeSeconds=1, **names)
    msgs = {m["MessageId"]: m for m in r.get("Messages", [])}
    a.expect("ReceiveMessage", len(msgs) == 4, "received %d of 4 messages" % len(msgs))
    m = msgs.get(first_id)
    if m:
        a.expect("ReceiveMessage", m["Body"] == body and m["MD5OfBody"] == md5_hex(body), "body %r" % m["Body"])
        a.expect("ReceiveMessage", m.get("MessageAttributes") == ATTRS, "MessageAttributes %r" % m.get("MessageAttributes"))
        a.expect("ReceiveMessage", m.get("MD5OfMessageAttributes") == md5_attributes(ATTRS), "MD5OfMessageAttributes")
        sa = m.get("Attributes", {})
        for k in ("SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp"):
            a.expect("ReceiveMessage", isinstance(sa.get(k), str), "system attribute %s = %r" % (k, sa.get(k)))
        a.expect("ReceiveMessage", sa.get("AWSTraceHeader") == TRACE["AWSTraceHeader"]["StringValue"], "AWSTraceHeader %r" % sa)
    else:
        a.problem("ReceiveMessage", "the first message was not received")
    # Without attribute names: no Attributes, no MessageAttributes, no MD5OfMessageAttributes.
    sqs.send_message(QueueUrl=std, MessageBody="bare", MessageAttributes={"k": ATTRS["str"]})
    a.call("ReceiveMessage", none=["Messages[].Attributes", "Messages[].MessageAttributes",
                                   "Messages[].MD5OfMessageAttributes"], QueueUrl=std, WaitTimeSeconds=1)
    if json_proto:
        # The deprecated AttributeNames still asks for system attributes.
        sqs.send_message(QueueUrl=std, MessageBody="old names")
        r = a.call("ReceiveMessage", none=["Messages[].MessageAttributes", "Messages[].MD5OfMessageAttributes"],
                   QueueUrl=std, AttributeNames=["SentTimestamp"], WaitTimeSeconds=1)
        a.expect("ReceiveMessage", [list(m.get("Attributes", {})) for m in r.get("Messages", [])] == [["SentTimestamp"]],
                 "AttributeNames=[SentTimestamp] in JSON: %r" % r.get("Messages"))
    # An empty receive.
    r = a.call("ReceiveMessage", none=["Messages"], QueueUrl=dlq2, WaitTimeSeconds=0)
    r = a.call("ReceiveMessage", opt=["Messages[].MessageAttributes", "Messages[].MD5OfMessageAttributes"],
               QueueUrl=fifo, MaxNumberOfMessages=10, AttributeNames=["All"], ReceiveRequestAttemptId="att-1")
    fa = r.get("Messages", [{}])[0].get("Attributes", {})
    for k in ("MessageGroupId", "MessageDeduplicationId", "SequenceNumber"):
        a.expect("ReceiveMessage", isinstance(fa.get(k), str), "FIFO system attribute %s = %r" % (k, fa.get(k)))
    handles = [m["ReceiptHandle"] for m in msgs.values()]

    # --- visibility and deletes
    if len(handles) >= 4:
        a.call("ChangeMessageVisibility", QueueUrl=std, ReceiptHandle=handles[0], VisibilityTimeout=120)
        r = a.call("ChangeMessageVisibilityBatch", QueueUrl=std, Entries=[
            {"Id": "v1", "ReceiptHandle": handles[1], "VisibilityTimeout": 100},
            {"Id": "v2", "ReceiptHandle": "garbage-handle", "VisibilityTimeout": 10}])
        a.expect("ChangeMessageVisibilityBatch", r["Successful"] == [{"Id": "v1"}], "Successful %r" % r["Successful"])
        a.expect("ChangeMessageVisibilityBatch", len(r["Failed"]) == 1 and r["Failed"][0]["Id"] == "v2"
                 and r["Failed"][0]["Code"] == "ReceiptHandleIsInvalid" and r["Failed"][0]["SenderFault"] is True,
                 "Failed %r" % r["Failed"])
        a.call("DeleteMessage", QueueUrl=std, ReceiptHandle=handles[0])
        r = a.call("DeleteMessageBatch", QueueUrl=std, Entries=[
            {"Id": "d1", "ReceiptHandle": handles[1]}, {"Id": "d2", "ReceiptHandle": handles[2]},
            {"Id": "d3", "ReceiptHandle": "garbage-handle"}])
        a.expect("DeleteMessageBatch", sorted(e["Id"] for e in r["Successful"]) == ["d1", "d2"], "Successful %r" % r)
        a.expect("DeleteMessageBatch", len(r["Failed"]) == 1 and r["Failed"][0]["Id"] == "d3"
                 and r["Failed"][0]["Code"] == "ReceiptHandleIsInvalid" and r["Failed"][0]["SenderFault"] is True,
                 "Failed %r" % r["Failed"])
    else:
        a.problem("DeleteMessage", "too few messages received to test visibility and deletes")
    r = a.call("SendMessageBatch", empty=["Successful"], QueueUrl=std, Entries=[{"Id": "big", "MessageBody": big}])
    a.expect("SendMessageBatch", [e["Id"] for e in r["Failed"]] == ["big"], "all-failed batch %r" % r)
    if len(handles) >= 4:
        r = a.call("ChangeMessageVisibilityBatch", empty=["Failed"], QueueUrl=std, Entries=[
            {"Id": "only", "ReceiptHandle": handles[3], "VisibilityTimeout": 0}])
        r = a.call("DeleteMessageBatch", empty=["Successful"], QueueUrl=std, Entries=[
            {"Id": "bad", "ReceiptHandle": "garbage-handle"}])
    a.call("PurgeQueue", QueueUrl=std)

    # --- dead-letter sources: 3 sources, pages of 2
    r = a.call("ListDeadLetterSourceQueues", QueueUrl=dlq, MaxResults=2)
    r2 = a.call("ListDeadLetterSourceQueues", none=["NextToken"], QueueUrl=dlq, MaxResults=2, NextToken=r.get("NextToken", ""))
    a.expect("ListDeadLetterSourceQueues", sorted(r["queueUrls"] + r2["queueUrls"]) == sorted(srcs),
             "pages %r + %r, want %r" % (r["queueUrls"], r2["queueUrls"], srcs))
    r = a.call("ListDeadLetterSourceQueues", none=["NextToken"], QueueUrl=dlq)
    a.expect("ListDeadLetterSourceQueues", len(r["queueUrls"]) == 3, "unpaged %r" % r)
    a.call("ListDeadLetterSourceQueues", none=["NextToken"], empty=["queueUrls"], QueueUrl=std)  # queueUrls is required: sent empty

    # --- move tasks. Task 1 (DLQ2 -> std, 1 msg/s) is cancelled while it runs.
    for i in range(5):
        sqs.send_message(QueueUrl=dlq2, MessageBody="m%d" % i)
    h1 = a.call("StartMessageMoveTask", SourceArn=dlq2_arn, DestinationArn=arn(std), MaxNumberOfMessagesPerSecond=1)["TaskHandle"]
    r = a.call("ListMessageMoveTasks", opt=["Results[].FailureReason"], none=["Results[].FailureReason"],
               SourceArn=dlq2_arn, MaxResults=10)
    t = r["Results"][0] if r.get("Results") else {}
    a.expect("ListMessageMoveTasks", t.get("Status") == "RUNNING" and t.get("TaskHandle") == h1
             and t.get("MaxNumberOfMessagesPerSecond") == 1 and t.get("ApproximateNumberOfMessagesToMove") == 5,
             "running task %r" % t)
    r = a.call("CancelMessageMoveTask", TaskHandle=h1)
    deadline = time.monotonic() + 20
    while True:
        r = sqs.list_message_move_tasks(SourceArn=dlq2_arn)
        if r["Results"][0]["Status"] not in ("RUNNING", "CANCELLING") or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # polling a status with a deadline
    a.call("ListMessageMoveTasks", none=["Results[].TaskHandle", "Results[].FailureReason"], SourceArn=dlq2_arn)
    # Task 2 (DLQ -> each message's source, no rate) runs to completion.
    sqs.send_message(QueueUrl=srcs[0], MessageBody="poison")
    m = sqs.receive_message(QueueUrl=srcs[0], WaitTimeSeconds=5, VisibilityTimeout=0).get("Messages", [])
    a.expect("StartMessageMoveTask", len(m) == 1, "redrive setup: first receive %r" % m)
    m = sqs.receive_message(QueueUrl=srcs[0], WaitTimeSeconds=1).get("Messages", [])
    a.expect("StartMessageMoveTask", m == [], "redrive setup: second receive should dead-letter, got %r" % m)
    a.call("StartMessageMoveTask", SourceArn=dlq_arn)
    deadline = time.monotonic() + 20
    while True:
        r = sqs.list_message_move_tasks(SourceArn=dlq_arn)
        if r["Results"][0]["Status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # polling a status with a deadline
    r = a.call("ListMessageMoveTasks", none=["Results[].TaskHandle", "Results[].FailureReason", "Results[].DestinationArn",
                                             "Results[].MaxNumberOfMessagesPerSecond"], SourceArn=dlq_arn)
    t = r["Results"][0]
    now_ms = time.time() * 1000
    a.expect("ListMessageMoveTasks", now_ms - 60000 < t["StartedTimestamp"] <= now_ms + 1000,
             "StartedTimestamp %r is not epoch milliseconds of the last minute" % t["StartedTimestamp"])
    a.expect("ListMessageMoveTasks", t.get("Status") == "COMPLETED" and t.get("ApproximateNumberOfMessagesMoved") == 1,
             "completed task %r" % t)
    # Task 3 (DLQ -> each message's source) fails: a message sent straight
    # to the DLQ has no source queue to go back to.
    sqs.send_message(QueueUrl=dlq, MessageBody="no source")
    a.call("StartMessageMoveTask", SourceArn=dlq_arn)
    deadline = time.monotonic() + 20
    while True:
        r = sqs.list_message_move_tasks(SourceArn=dlq_arn)
        if r["Results"][0]["Status"] != "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.1)  # polling a status with a deadline
    r = a.call("ListMessageMoveTasks", none=["Results[].TaskHandle", "Results[].DestinationArn",
                                             "Results[].MaxNumberOfMessagesPerSecond"], SourceArn=dlq_arn, MaxResults=1)
    t = r["Results"][0]
    a.expect("ListMessageMoveTasks", len(r["Results"]) == 1 and t.get("Status") == "FAILED" and t.get("FailureReason"),
             "failed task %r" % r["Results"])

    # --- errors
    missing = std.rsplit("/", 1)[0] + "/" + P + "-missing"
    errs = {
        "get-queue-url-missing": lambda: sqs.get_queue_url(QueueName=P + "-missing"),
        "send-to-missing-queue": lambda: sqs.send_message(QueueUrl=missing, MessageBody="x"),
        "queue-name-exists": lambda: sqs.create_queue(QueueName=P + "-std", Attributes={"VisibilityTimeout": "1"}),
        "receipt-handle-invalid": lambda: sqs.delete_message(QueueUrl=std, ReceiptHandle="garbage-handle"),
        "too-many-entries": lambda: sqs.delete_message_batch(QueueUrl=std, Entries=[
            {"Id": "e%d" % i, "ReceiptHandle": "h"} for i in range(11)]),
        "batch-ids-not-distinct": lambda: sqs.change_message_visibility_batch(QueueUrl=std, Entries=[
            {"Id": "a", "ReceiptHandle": "h", "VisibilityTimeout": 1}, {"Id": "a", "ReceiptHandle": "h", "VisibilityTimeout": 1}]),
        "invalid-attribute-name": lambda: sqs.get_queue_attributes(QueueUrl=std, AttributeNames=["NoSuchAttribute"]),
        "purge-in-progress": lambda: sqs.purge_queue(QueueUrl=std),  # the broker runs with --strict-purge
        "move-source-missing": lambda: sqs.start_message_move_task(SourceArn=dlq_arn.rsplit(":", 1)[0] + ":" + P + "-missing"),
        "empty-batch": lambda: sqs.send_message_batch(QueueUrl=std, Entries=[]),
        "cancel-bad-handle": lambda: sqs.cancel_message_move_task(TaskHandle="not-a-task-handle"),
        "list-move-tasks-missing-source": lambda: sqs.list_message_move_tasks(
            SourceArn=dlq_arn.rsplit(":", 1)[0] + ":" + P + "-missing"),
        "receive-max-invalid": lambda: sqs.receive_message(QueueUrl=std, MaxNumberOfMessages=11),
    }
    out = {name: a.error(fn) for name, fn in errs.items()}

    a.call("DeleteQueue", QueueUrl=fifo)
    return out


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    endpoint, protocol, prefix = sys.argv[1:]
    session = botocore.session.get_session()
    model_protocol = session.get_service_model("sqs").metadata["protocol"]
    if model_protocol != protocol:
        print("this botocore %s speaks %s, not %s" % (botocore.__version__, model_protocol, protocol), file=sys.stderr)
        return 2
    if protocol == "query":
        session = add_move_tasks(session)
    sqs = session.create_client("sqs", endpoint_url=endpoint, region_name="us-east-1",
                                aws_access_key_id="AKIDALL", aws_secret_access_key="secret",
                                config=Config(retries={"max_attempts": 1}))
    a = Audit(sqs, protocol)
    result = {"protocol": protocol, "botocore": botocore.__version__, "fatal": ""}
    try:
        result["errors"] = run(a, prefix)
    except Exception:
        result["fatal"] = traceback.format_exc()
    result["actions"] = a.actions
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
