// Backpressure through the AWS SDK for JavaScript v3 (@aws-sdk/client-sqs,
// AWS JSON 1.0): a send to a full queue (MaxDepth) is refused with
// RequestThrottled (HTTP 403), and the SDK's default retry strategy retries
// it as throttling until a consumer made room. Run by
// e2e/clients_backpressure_test.go.
//
// usage: node backpressure.mjs ENDPOINT QUEUE
// A middleware inside the retry loop sees every attempt; after the refused
// one, a consumer (a client without retries) takes the message that fills the
// queue, so the next attempt can only succeed if the SDK retried. Prints one
// line per step and, last, "attempts=N statuses=S codes=C"; exits 1 with the
// reason on the first failure.
import {
  SQSClient,
  CreateQueueCommand,
  SendMessageCommand,
  ReceiveMessageCommand,
  DeleteMessageCommand,
  DeleteQueueCommand,
  RequestThrottled,
} from "@aws-sdk/client-sqs";

class Failed extends Error {}

function check(cond, what) {
  if (!cond) throw new Failed(what);
  console.log("ok:", what);
}

const [endpoint, queue] = process.argv.slice(2);
const client = (maxAttempts) =>
  new SQSClient({
    endpoint,
    region: "us-east-1",
    credentials: { accessKeyId: "AKIDJSV3", secretAccessKey: "secret" },
    maxAttempts,
  });

async function main() {
  const producer = client(3); // the default retry strategy ("standard"), 3 attempts
  const consumer = client(1);
  const { QueueUrl } = await producer.send(new CreateQueueCommand({ QueueName: queue, Attributes: { MaxDepth: "1" } }));
  await producer.send(new SendMessageCommand({ QueueUrl, MessageBody: "first" }));

  const seen = []; // [status, error name] of each SendMessage attempt
  producer.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== "SendMessageCommand") return next(args);
      try {
        const out = await next(args);
        seen.push([out.response?.statusCode ?? 200, null]);
        return out;
      } catch (e) {
        // Only answered attempts: a lost connection is retried as such.
        if (e.$metadata?.httpStatusCode === undefined) throw e;
        seen.push([e.$metadata.httpStatusCode, e.name]);
        if (e.$metadata?.httpStatusCode === 403 && seen.length === 1) {
          const got = (await consumer.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 5 }))).Messages ?? [];
          check(got.length === 1 && got[0].Body === "first", "the consumer received the message that fills the queue");
          await consumer.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: got[0].ReceiptHandle }));
          console.log("ok: the consumer made room after attempt", seen.length);
        }
        throw e;
      }
    },
    // Low priority in finalizeRequest: inside the retry middleware, so once per attempt.
    { step: "finalizeRequest", priority: "low", name: "sluiceCountAttempts" },
  );

  const out = await producer.send(new SendMessageCommand({ QueueUrl, MessageBody: "second" }));
  check(typeof out.MessageId === "string", "the send to the full queue succeeded after retries");
  check(out.$metadata.attempts >= 2, `$metadata.attempts = ${out.$metadata.attempts}`);
  check(seen.length === 2 && seen[0][0] === 403 && seen[0][1] === "RequestThrottled" && seen[1][0] === 200,
    `attempts: ${JSON.stringify(seen)}`);

  const got = (await consumer.send(new ReceiveMessageCommand({ QueueUrl, WaitTimeSeconds: 5 }))).Messages ?? [];
  check(got.length === 1 && got[0].Body === "second", "the queue holds the retried message");

  // Without retries the refusal reaches the caller as the modeled RequestThrottled.
  try {
    await consumer.send(new SendMessageCommand({ QueueUrl, MessageBody: "third" }));
    check(false, "a send to a full queue without retries succeeded");
  } catch (e) {
    if (e instanceof Failed) throw e;
    check(e instanceof RequestThrottled && e.$metadata.httpStatusCode === 403 && /full/.test(e.message),
      `without retries: ${e.name} ${e.$metadata?.httpStatusCode} ${e.message}`);
  }
  await producer.send(new DeleteQueueCommand({ QueueUrl }));
  console.log(`attempts=${seen.length} statuses=${seen.map((s) => s[0]).join(",")} codes=${seen.map((s) => s[1]).join(",")}`);
}

main().catch((e) => {
  console.log("FAILED:", e instanceof Failed ? e.message : e.stack ?? String(e));
  process.exit(1);
});
