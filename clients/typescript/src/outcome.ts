/**
 * What a handler's result makes of its message: the outcomes and the errors a handler throws
 * to choose one.
 *
 * @packageDocumentation
 */

/** A failure reason's limit in bytes (the broker keeps at most 1 KiB). */
export const MAX_REASON_BYTES = 1024;
/** A delay's limit in seconds: 12 hours, the longest lease. */
export const MAX_DELAY_SECONDS = 43_200;

/**
 * Thrown by a handler: the message comes back after exactly `delaySeconds` (the attempt
 * counts), with the cause's text as the reason.
 */
export class RetryAfterError extends Error {
  constructor(readonly delaySeconds: number, cause?: unknown) {
    super(cause === undefined ? `retry after ${delaySeconds}s` : errorText(cause), { cause });
    this.name = "RetryAfterError";
  }
}

/** Thrown by a handler: the message comes back after `delaySeconds`, the attempt not counted. */
export class SnoozeError extends Error {
  constructor(readonly delaySeconds: number) {
    super(`snooze ${delaySeconds}s`);
    this.name = "SnoozeError";
  }
}

/** Thrown by a handler: the message moves to the dead-letter queue now, with `reason`. */
export class DeadLetterError extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = "DeadLetterError";
  }
}

/** `throw retryAfter(60, err)`: a nack whose message comes back after exactly 60 s. */
export function retryAfter(delaySeconds: number, cause?: unknown): RetryAfterError {
  return new RetryAfterError(delaySeconds, cause);
}

/** `throw snooze(600)`: back in 10 minutes, the attempt not counted. */
export function snooze(delaySeconds: number): SnoozeError {
  return new SnoozeError(delaySeconds);
}

/** `throw deadLetterNow("no such customer")`: to the dead-letter queue at once. */
export function deadLetterNow(reason: string): DeadLetterError {
  return new DeadLetterError(reason);
}

/** What becomes of a handled message. */
export type Outcome =
  | { kind: "ack" }
  | { kind: "nack"; reason: string; delaySeconds?: number }
  | { kind: "snooze"; delaySeconds: number }
  | { kind: "deadLetter"; reason: string }
  | { kind: "release" };

/**
 * The outcome of a handler's result, the one rule the pool applies: nothing thrown acks; a
 * {@link DeadLetterError} dead-letters; a {@link SnoozeError} snoozes; a
 * {@link RetryAfterError} nacks with its delay; anything else thrown nacks with its text as
 * the reason (the queue's retry policy decides when it comes back). After the pool's grace
 * ran out (`interrupted`), an ordinary error releases instead: the interruption is not the
 * message's failure. Delays are whole seconds up to 12 h (a delay under a second is one
 * second); reasons are cut to 1 KiB.
 */
export function outcomeOf(thrown: unknown, failed: boolean, interrupted = false): Outcome {
  if (!failed) return { kind: "ack" };
  if (thrown instanceof DeadLetterError) return { kind: "deadLetter", reason: cutReason(thrown.reason) };
  if (thrown instanceof SnoozeError) return { kind: "snooze", delaySeconds: seconds(thrown.delaySeconds, 0) };
  if (thrown instanceof RetryAfterError) {
    return { kind: "nack", reason: cutReason(thrown.message), delaySeconds: seconds(thrown.delaySeconds, 1) };
  }
  if (interrupted) return { kind: "release" };
  return { kind: "nack", reason: cutReason(errorText(thrown)) };
}

/** An error's text: an Error's message, or any other thrown value as a string. */
export function errorText(v: unknown): string {
  if (v instanceof Error) return v.message || v.name;
  return String(v);
}

function seconds(d: number, min: number): number {
  if (!Number.isFinite(d) || d <= 0) return min;
  return Math.min(MAX_DELAY_SECONDS, Math.max(min, Math.ceil(d)));
}

/** Cuts a reason to {@link MAX_REASON_BYTES} at a character boundary. */
export function cutReason(reason: string): string {
  // Lone surrogates become U+FFFD (the broker takes valid UTF-8 only).
  const s = reason.toWellFormed();
  if (Buffer.byteLength(s) <= MAX_REASON_BYTES) return s;
  let out = "";
  let n = 0;
  for (const ch of s) {
    const b = Buffer.byteLength(ch);
    if (n + b > MAX_REASON_BYTES) break;
    out += ch;
    n += b;
  }
  return out;
}
