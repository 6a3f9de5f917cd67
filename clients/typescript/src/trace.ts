/**
 * W3C trace context through a handler: the traceparent its message was sent with, carried
 * on to the messages the handler sends.
 *
 * @packageDocumentation
 */

import { AsyncLocalStorage } from "node:async_hooks";

const current = new AsyncLocalStorage<string>();

/**
 * The W3C traceparent of the message whose handler is running (in this async context), or
 * undefined outside a handler or for a message sent without one. The client's sends use it
 * as the default `traceContext`, so a trace goes on through the messages a handler sends.
 */
export function traceParent(): string | undefined {
  return current.getStore() || undefined;
}

/** Runs fn with `traceContext` as the current traceparent. */
export function withTraceParent<T>(traceContext: string, fn: () => T): T {
  return current.run(traceContext, fn);
}
