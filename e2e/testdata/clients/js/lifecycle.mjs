// One part of a message's life, driven through the AWS SDK for JavaScript v3
// (@aws-sdk/client-sqs, pinned in package-lock.json; AWS JSON 1.0) against a
// sluice broker. Run by e2e/clients_javascript_test.go.
//
// usage: node lifecycle.mjs ENDPOINT PART PREFIX
//   PART is standard-lifecycle, standard-redrive, standard-move,
//   fifo-lifecycle, fifo-redrive or fifo-move; PREFIX makes queue names unique.
// Prints one line per step; exits 1 with the reason on the first failure.
//
// The SDK's own MD5 check of message bodies stays on (the client's default);
// the SDK does not check MD5OfMessageAttributes, so this script does.
import { createHash } from "node:crypto";
import { createRequire } from "node:module";
import {
  SQSClient,
  CreateQueueCommand,
  GetQueueUrlCommand,
  GetQueueAttributesCommand,
  SendMessageCommand,
  SendMessageBatchCommand,
  ReceiveMessageCommand,
  ChangeMessageVisibilityCommand,
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  DeleteMessageBatchCommand,
  DeleteQueueCommand,
  ListDeadLetterSourceQueuesCommand,
  StartMessageMoveTaskCommand,
  ListMessageMoveTasksCommand,
  QueueDoesNotExist,
} from "@aws-sdk/client-sqs";

class Failed extends Error {}

function check(cond, what) {
  if (!cond) throw new Failed(what);
  console.log("ok:", what);
}

const md5 = (data) => createHash("md5").update(data).digest("hex");

// SQS's digest of message attributes: names sorted; each field a 4-byte
// big-endian length then bytes; the value prefixed by 1 (string) or 2 (binary).
function md5Attributes(attrs) {
  const h = createHash("md5");
  const field = (b) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b.length);
    h.update(len);
    h.update(b);
  };
  for (const name of Object.keys(attrs).sort()) {
    const a = attrs[name];
    field(Buffer.from(name, "utf8"));
    field(Buffer.from(a.DataType, "utf8"));
    if (a.StringValue !== undefined) {
      h.update(Buffer.from([1]));
      field(Buffer.from(a.StringValue, "utf8"));
    } else {
      h.update(Buffer.from([2]));
      field(Buffer.from(a.BinaryValue));
    }
  }
  return h.digest("hex");
}

const ATTRS = {
  trace: { DataType: "String", StringValue: "trace-\u00e9\u6f22" },
  count: { DataType: "Number", StringValue: "42" },
  blob: { DataType: "Binary", BinaryValue: new Uint8Array([0, 1, 0xfe, 0xff]) },
  kind: { DataType: "String.custom", StringValue: "custom type" },
};

class Life {
  constructor(endpoint, part, prefix) {
    [this.kind, this.what] = part.split(/-(.*)/s);
    this.fifo = this.kind === "fifo";
    this.prefix = prefix;
    this.sqs = new SQSClient({
      endpoint,
      region: "us-east-1",
      credentials: { accessKeyId: "AKIDJSV3", secretAccessKey: "secret" },
      maxAttempts: 3,
    });
  }

  send(cmd, input) {
    return this.sqs.send(new cmd(input));
  }

  name(base) {
    return `${this.prefix}-${base}${this.fifo ? ".fifo" : ""}`;
  }

  async create(base, attrs = {}) {
    const Attributes = Object.fromEntries(Object.entries(attrs).map(([k, v]) => [k, String(v)]));
    if (this.fifo) Attributes.FifoQueue = "true";
    const name = this.name(base);
    const { QueueUrl } = await this.send(CreateQueueCommand, { QueueName: name, Attributes });
    check(QueueUrl.endsWith("/" + name), `CreateQueue ${name} -> ${QueueUrl}`);
    const got = await this.send(GetQueueUrlCommand, { QueueName: name });
    check(got.QueueUrl === QueueUrl, `GetQueueUrl ${name}`);
    return QueueUrl;
  }

  async attrs(url, names = ["All"]) {
    return (await this.send(GetQueueAttributesCommand, { QueueUrl: url, AttributeNames: names })).Attributes;
  }

  async arn(url) {
    return (await this.attrs(url, ["QueueArn"])).QueueArn;
  }

  async counts(url) {
    const a = await this.attrs(url);
    return [Number(a.ApproximateNumberOfMessages), Number(a.ApproximateNumberOfMessagesNotVisible)];
  }

  fifoArgs(group, dedup) {
    return this.fifo ? { MessageGroupId: group, MessageDeduplicationId: dedup } : {};
  }

  async sendOne(url, body, { group = "g1", dedup = body } = {}) {
    const out = await this.send(SendMessageCommand, {
      QueueUrl: url, MessageBody: body, MessageAttributes: ATTRS, ...this.fifoArgs(group, dedup),
    });
    check(out.MD5OfMessageBody === md5(body), `SendMessage MD5OfMessageBody of ${JSON.stringify(body)}`);
    check(out.MD5OfMessageAttributes === md5Attributes(ATTRS), "SendMessage MD5OfMessageAttributes");
    if (this.fifo) check(/^\d+$/.test(out.SequenceNumber ?? ""), `SendMessage SequenceNumber ${out.SequenceNumber}`);
    return out.MessageId;
  }

  async receive(url, { wait = 5, max = 10 } = {}) {
    const out = await this.send(ReceiveMessageCommand, {
      QueueUrl: url, WaitTimeSeconds: wait, MaxNumberOfMessages: max,
      MessageAttributeNames: ["All"], MessageSystemAttributeNames: ["All"],
    });
    const msgs = out.Messages ?? [];
    for (const m of msgs) {
      if (m.MessageAttributes && Object.keys(m.MessageAttributes).length > 0) {
        check(m.MD5OfMessageAttributes === md5Attributes(m.MessageAttributes),
          `ReceiveMessage MD5OfMessageAttributes of ${JSON.stringify(m.Body)}`);
      }
    }
    return msgs;
  }

  async receiveAll(url, n, deadlineMs = 30000) {
    const got = [];
    const deadline = Date.now() + deadlineMs;
    while (got.length < n) {
      if (Date.now() > deadline) throw new Failed(`received ${got.length} of ${n} messages within ${deadlineMs} ms`);
      got.push(...(await this.receive(url)));
    }
    check(got.length === n, `received ${n} messages`);
    return got;
  }

  async expectEmpty(url, what) {
    const t0 = Date.now();
    const msgs = await this.receive(url, { wait: 1 });
    check(msgs.length === 0, `${what}: a 1 s long poll returns nothing (got ${msgs.map((m) => m.Body)})`);
    check(Date.now() - t0 >= 800, `${what}: the empty long poll waited about 1 s`);
  }

  async lifecycle() {
    const url = await this.create("life", { VisibilityTimeout: 30 });
    const a = await this.attrs(url);
    check(a.VisibilityTimeout === "30", "queue attribute VisibilityTimeout");
    check(a.QueueArn.endsWith(":" + this.name("life")), "queue attribute QueueArn");
    if (this.fifo) check(a.FifoQueue === "true", "queue attribute FifoQueue");
    await this.expectEmpty(url, "new queue");

    // A long poll started before the send returns the message as soon as it is sent.
    const t0 = Date.now();
    const poll = this.receive(url, { wait: 20, max: 1 });
    const mid = await this.sendOne(url, "single body", { dedup: "d1" });
    let msgs = await poll;
    const took = Date.now() - t0;
    check(msgs.length === 1 && msgs[0].MessageId === mid, "the long poll got the sent message");
    check(took < 15000, `the long poll returned in ${took} ms, before its 20 s wait`);
    const m = msgs[0];
    check(m.Body === "single body", "body round trip");
    check(m.MessageAttributes.trace.StringValue === ATTRS.trace.StringValue, "String attribute round trip");
    check(m.MessageAttributes.count.DataType === "Number" && m.MessageAttributes.count.StringValue === "42", "Number attribute round trip");
    check(Buffer.from(m.MessageAttributes.blob.BinaryValue).equals(Buffer.from(ATTRS.blob.BinaryValue)), "Binary attribute round trip");
    check(m.MessageAttributes.kind.DataType === "String.custom", "custom type round trip");
    const sa = m.Attributes;
    check(sa.ApproximateReceiveCount === "1", "ApproximateReceiveCount 1");
    check(sa.SenderId && /^\d+$/.test(sa.SentTimestamp), "SenderId and SentTimestamp");
    if (this.fifo) {
      check(sa.MessageGroupId === "g1" && sa.MessageDeduplicationId === "d1", "FIFO system attributes");
      check(/^\d+$/.test(sa.SequenceNumber ?? ""), "FIFO SequenceNumber on receive");
    }
    let c = await this.counts(url);
    check(c[0] === 0 && c[1] === 1, `counts while leased: 0 visible, 1 in flight (${c})`);

    // Shorten the lease to 1 s: a long poll gets the message back when it ends.
    await this.send(ChangeMessageVisibilityCommand, { QueueUrl: url, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 1 });
    msgs = await this.receive(url, { wait: 10, max: 1 });
    check(msgs.length === 1 && msgs[0].MessageId === mid, "redelivered after ChangeMessageVisibility 1");
    check(msgs[0].Attributes.ApproximateReceiveCount === "2", "ApproximateReceiveCount 2");
    await this.send(DeleteMessageCommand, { QueueUrl: url, ReceiptHandle: msgs[0].ReceiptHandle });
    c = await this.counts(url);
    check(c[0] === 0 && c[1] === 0, "DeleteMessage removed it");

    if (this.fifo) {
      const dup = await this.sendOne(url, "single body", { dedup: "d1" });
      check(dup === mid, "a duplicate send inside the dedup window answers the first MessageId");
      await this.expectEmpty(url, "after a deduplicated send");
    }

    // Batch send, batch change visibility, batch delete.
    const entries = [0, 1, 2].map((i) => ({
      Id: `e${i}`, MessageBody: `batch body ${i}`,
      MessageAttributes: { index: { DataType: "Number", StringValue: String(i) }, ...ATTRS },
      ...(this.fifo ? { MessageGroupId: "g2", MessageDeduplicationId: `b${i}` } : {}),
    }));
    let out = await this.send(SendMessageBatchCommand, { QueueUrl: url, Entries: entries });
    check(out.Successful?.length === 3 && !out.Failed?.length, "SendMessageBatch: 3 successful");
    for (const s of out.Successful) {
      const e = entries[Number(s.Id.slice(1))];
      check(s.MD5OfMessageBody === md5(e.MessageBody), `batch entry ${s.Id} MD5OfMessageBody`);
      check(s.MD5OfMessageAttributes === md5Attributes(e.MessageAttributes), `batch entry ${s.Id} MD5OfMessageAttributes`);
    }
    let got = await this.receiveAll(url, 3);
    const bodies = got.map((x) => x.Body);
    const want = ["batch body 0", "batch body 1", "batch body 2"];
    if (this.fifo) check(JSON.stringify(bodies) === JSON.stringify(want), `FIFO order within the group: ${bodies}`);
    else check(JSON.stringify([...bodies].sort()) === JSON.stringify(want), "all batch bodies");
    out = await this.send(ChangeMessageVisibilityBatchCommand, {
      QueueUrl: url, Entries: got.map((x, i) => ({ Id: `v${i}`, ReceiptHandle: x.ReceiptHandle, VisibilityTimeout: 0 })),
    });
    check(out.Successful?.length === 3 && !out.Failed?.length, "ChangeMessageVisibilityBatch: 3 successful");
    got = await this.receiveAll(url, 3);
    out = await this.send(DeleteMessageBatchCommand, {
      QueueUrl: url, Entries: got.map((x, i) => ({ Id: `d${i}`, ReceiptHandle: x.ReceiptHandle })),
    });
    check(out.Successful?.length === 3 && !out.Failed?.length, "DeleteMessageBatch: 3 successful");
    c = await this.counts(url);
    check(c[0] === 0 && c[1] === 0, "queue empty after the batch delete");
    await this.expectEmpty(url, "after the batch delete");

    await this.send(DeleteQueueCommand, { QueueUrl: url });
    try {
      await this.send(GetQueueUrlCommand, { QueueName: this.name("life") });
      throw new Failed("GetQueueUrl of a deleted queue succeeded");
    } catch (e) {
      if (!(e instanceof QueueDoesNotExist)) throw e;
      check(true, `DeleteQueue: GetQueueUrl answers QueueDoesNotExist (${e.name})`);
    }
  }

  // Sends one message to a queue whose RedrivePolicy has maxReceiveCount 1,
  // receives it, ends its lease; the next receive moves it to the DLQ.
  // Leaves the message visible in the DLQ.
  async redrive() {
    const dlq = await this.create("dlq");
    const dlqArn = await this.arn(dlq);
    const src = await this.create("src", {
      VisibilityTimeout: 30,
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: "1" }),
    });
    const rp = JSON.parse((await this.attrs(src, ["RedrivePolicy"])).RedrivePolicy);
    check(rp.deadLetterTargetArn === dlqArn && Number(rp.maxReceiveCount) === 1, `RedrivePolicy round trip: ${JSON.stringify(rp)}`);
    const body = `poison ${this.prefix}`;
    const mid = await this.sendOne(src, body, { dedup: "p1" });
    let msgs = await this.receive(src);
    check(msgs.length === 1 && msgs[0].MessageId === mid, "first receive from the source");
    await this.send(ChangeMessageVisibilityCommand, { QueueUrl: src, ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0 });
    msgs = await this.receive(src, { wait: 1 });
    check(msgs.length === 0, "second receive moves the message to the DLQ instead of returning it");
    msgs = await this.receive(dlq);
    check(msgs.length === 1 && msgs[0].MessageId === mid && msgs[0].Body === body, "the message is in the DLQ");
    check(msgs[0].MessageAttributes.trace.StringValue === ATTRS.trace.StringValue, "attributes kept in the DLQ");
    check(msgs[0].Attributes.DeadLetterQueueSourceArn === (await this.arn(src)), "DeadLetterQueueSourceArn");
    await this.send(ChangeMessageVisibilityCommand, { QueueUrl: dlq, ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0 });
    const c = await this.counts(src);
    check(c[0] === 0 && c[1] === 0, "source empty");
    return { src, dlq, body };
  }

  async move() {
    const { src, dlq, body } = await this.redrive();
    const dlqArn = await this.arn(dlq);
    const srcs = (await this.send(ListDeadLetterSourceQueuesCommand, { QueueUrl: dlq })).queueUrls ?? [];
    check(srcs.length === 1 && srcs[0] === src, `ListDeadLetterSourceQueues: ${srcs}`);
    const { TaskHandle } = await this.send(StartMessageMoveTaskCommand, { SourceArn: dlqArn });
    check(!!TaskHandle, "StartMessageMoveTask answered a TaskHandle");
    const deadline = Date.now() + 30000;
    let task;
    for (;;) {
      const res = (await this.send(ListMessageMoveTasksCommand, { SourceArn: dlqArn })).Results ?? [];
      check(res.length >= 1, "ListMessageMoveTasks lists the task");
      task = res[0];
      if (task.Status === "COMPLETED") break;
      if (!["RUNNING", "CANCELLING"].includes(task.Status) || Date.now() > deadline) {
        throw new Failed(`move task status ${task.Status}: ${JSON.stringify(task)}`);
      }
      await new Promise((r) => setTimeout(r, 100)); // polling a status with a deadline
    }
    check(task.ApproximateNumberOfMessagesMoved === 1, `the task moved 1 message: ${JSON.stringify(task)}`);
    check(task.SourceArn === dlqArn, "task SourceArn");
    const msgs = await this.receive(src);
    check(msgs.length === 1 && msgs[0].Body === body, "the message is back in the source queue");
    check(msgs[0].MessageAttributes.count.StringValue === "42", "attributes kept by the move");
    await this.send(DeleteMessageCommand, { QueueUrl: src, ReceiptHandle: msgs[0].ReceiptHandle });
    const c = await this.counts(dlq);
    check(c[0] === 0 && c[1] === 0, "DLQ empty after the move");
  }
}

const [endpoint, part, prefix] = process.argv.slice(2);
if (!prefix) {
  console.error("usage: node lifecycle.mjs ENDPOINT PART PREFIX");
  process.exit(2);
}
const require = createRequire(import.meta.url);
console.log("@aws-sdk/client-sqs", require("@aws-sdk/client-sqs/package.json").version, "node", process.version, "part", part);
const life = new Life(endpoint, part, prefix);
try {
  await life[life.what]();
  console.log("PASSED:", part);
} catch (e) {
  console.error(e);
  console.error("FAILED:", part);
  process.exit(1);
}
