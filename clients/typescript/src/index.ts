/**
 * Sluice for Node.js: a client of the native JSON API ({@link Client}), consumer and
 * producer streams ({@link ConsumerStream}, {@link Publisher}), a worker pool ({@link Pool})
 * with handler outcomes, and exactly-once effects through idempotency keys in PostgreSQL
 * ({@link PgStore}).
 *
 * @packageDocumentation
 */

export * from "./client.js";
export * from "./errors.js";
export * from "./idempotency.js";
export * from "./outcome.js";
export * from "./stream.js";
export * from "./trace.js";
export * from "./worker.js";
