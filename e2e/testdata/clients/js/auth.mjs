// Authentication against a sluice broker with access keys, through the AWS
// SDK for JavaScript v3 (credentials from AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY). Run by e2e/clients_auth_test.go.
//
// usage: node auth.mjs ENDPOINT PREFIX EXPECT
//   EXPECT is "ok" or the error code the first call must fail with.
import {
  SQSClient,
  CreateQueueCommand,
  SendMessageCommand,
  ReceiveMessageCommand,
  DeleteMessageCommand,
} from "@aws-sdk/client-sqs";

const [endpoint, prefix, expect] = process.argv.slice(2);
const sqs = new SQSClient({ endpoint, region: "us-east-1", maxAttempts: 1 });

let url;
try {
  url = (await sqs.send(new CreateQueueCommand({ QueueName: `${prefix}-auth` }))).QueueUrl;
} catch (e) {
  const code = e.Code ?? e.name;
  if (code === expect || e.name === expect) {
    console.log("refused as expected:", code, e.$metadata?.httpStatusCode);
    process.exit(0);
  }
  console.log("FAIL: CreateQueue answered", code, e.name, e.message);
  process.exit(1);
}
if (expect !== "ok") {
  console.log("FAIL: CreateQueue succeeded, want", expect);
  process.exit(1);
}
await sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: "signed hello" }));
const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, WaitTimeSeconds: 1 }));
if (got.Messages?.length !== 1 || got.Messages[0].Body !== "signed hello") {
  console.log("FAIL: received", JSON.stringify(got.Messages));
  process.exit(1);
}
await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: got.Messages[0].ReceiptHandle }));
console.log("ok: send, receive, delete");
