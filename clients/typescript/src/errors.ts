/**
 * Errors the broker answers, and the worker's own.
 *
 * @packageDocumentation
 */

/**
 * An error answered by the broker: its HTTP status (or 0 on a stream), the native API's error
 * code (`queue_not_found`, `invalid_parameter`, `queue_full`, ...; the broker's docs/api.md
 * lists them) and its message for a person.
 */
export class SluiceError extends Error {
  /** The HTTP status of the answer; 0 for an error carried by a stream's frame. */
  readonly status: number;
  /** The native API's error code, e.g. `queue_not_found`. */
  readonly code: string;
  /** Seconds the broker asked to wait (`Retry-After`), or undefined. */
  readonly retryAfterSeconds: number | undefined;

  constructor(status: number, code: string, message: string, retryAfterSeconds?: number) {
    super(`sluice: ${code}: ${message}`);
    this.name = "SluiceError";
    this.status = status;
    this.code = code;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The error codes a program usually matches (`err.code === Codes.QueueNotFound`). */
export const Codes = {
  QueueNotFound: "queue_not_found",
  QueueExists: "queue_exists",
  QueueFull: "queue_full",
  StoreFull: "store_full",
  InvalidParameter: "invalid_parameter",
  InvalidReceipt: "invalid_receipt",
  MessageNotInFlight: "message_not_in_flight",
  Conflict: "conflict",
  Throttled: "throttled",
  OverLimit: "over_limit",
  Unavailable: "unavailable",
} as const;

/**
 * The reason of a handler's abort signal when its message's lease was lost: the heartbeat
 * could not extend it, or a stream's message reached the stream's maximum hold. The
 * handler's outcome is then not applied: the message belongs to another delivery.
 */
export class LeaseLostError extends Error {
  constructor(message = "the message's lease was lost") {
    super(message);
    this.name = "LeaseLostError";
  }
}

/**
 * The reason of a handler's abort signal when the pool stops and its grace has run out. A
 * handler that then throws an ordinary error has its message released (the attempt does
 * not count), not nacked.
 */
export class ShutdownError extends Error {
  constructor(message = "the worker pool is shutting down") {
    super(message);
    this.name = "ShutdownError";
  }
}
