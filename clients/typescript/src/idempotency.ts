/**
 * Exactly once where it matters: a message's idempotency key, and a PostgreSQL store that
 * records it in the transaction of the handler's own writes (the Go `pgstore`'s table, so Go
 * and TypeScript workers can share it).
 *
 * @packageDocumentation
 */

import type { Attribute } from "./client.js";
import type { Handler } from "./worker.js";

/**
 * The idempotency key of a message: its `IdempotencyKey` String attribute, else its id. Give
 * the key at the producer, derived from the work (`payroll-2026-11/employee-42`): an id
 * protects against redelivery only, while a producer's retried send or a replay from the
 * dead-letter queue makes a new message with a new id and the same key.
 */
export function idempotencyKey(m: { id: string; attributes: Readonly<Record<string, Attribute>> }): string {
  const a = m.attributes["IdempotencyKey"];
  return a && a.type.startsWith("String") && a.value !== "" ? a.value : m.id;
}

/** The part of a `pg` client the store uses (a `pg.PoolClient`). */
export interface PgClient {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null }>;
  release(err?: Error | boolean): void;
}

/** The part of a `pg.Pool` the store uses. */
export interface PgPool {
  connect(): Promise<PgClient>;
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: Record<string, unknown>[] }>;
}

/** Options of {@link PgStore.create}. */
export interface PgStoreOptions {
  /** The keys table, created when missing (default `sluice_idempotency_keys`): letters, digits, underscores, at most 63. */
  table?: string;
  /** The schema that qualifies the table (default: none, the search_path). Not created. */
  schema?: string;
}

/** The Go `pgstore`'s default table, which this store shares. */
export const DEFAULT_TABLE = "sluice_idempotency_keys";

const ident = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

function quote(name: string): string {
  return `"${name}"`;
}

/**
 * The PostgreSQL idempotency store: one row per key whose work is done (`key text COLLATE
 * "C" PRIMARY KEY, recorded_at timestamptz`, an index on `recorded_at`), the same table as
 * the Go worker's `pgstore`.
 *
 * Two deliveries of one key at once both insert it: PostgreSQL's unique index makes the
 * second wait for the first transaction; when it commits, the second finds the key, and when
 * it rolls back, the second runs. Keep {@link PgStore.inTx}'s function short.
 */
export class PgStore implements KeyStore {
  private constructor(private readonly pool: PgPool, private readonly table: string) {}

  /** Makes a store on `pool` (a `pg.Pool`, which stays the caller's), creating its table when missing. */
  static async create(pool: PgPool, options: PgStoreOptions = {}): Promise<PgStore> {
    const table = options.table ?? DEFAULT_TABLE;
    if (!ident.test(table)) throw new RangeError(`sluice: PgStoreOptions.table ${JSON.stringify(table)}: use 1..63 letters, digits or underscores, not starting with a digit`);
    if (options.schema !== undefined && !ident.test(options.schema)) {
      throw new RangeError(`sluice: PgStoreOptions.schema ${JSON.stringify(options.schema)}: use 1..63 letters, digits or underscores, not starting with a digit`);
    }
    const qualified = options.schema ? `${quote(options.schema)}.${quote(table)}` : quote(table);
    const indexName = table.slice(0, 63 - "_recorded_at".length) + "_recorded_at";
    const index = quote(indexName);
    // The DDL runs only when the table or its index is missing, as the Go pgstore's New: even
    // with IF NOT EXISTS, CREATE INDEX takes its SHARE lock on the table before it looks, so a
    // create beside a handler's open transaction that recorded a key waited for that
    // transaction, and every key recorded after it waited behind the create.
    const indexQualified = options.schema ? `${quote(options.schema)}.${index}` : index;
    const present = await pool.query(
      "SELECT to_regclass($1) IS NOT NULL AND to_regclass($2) IS NOT NULL AS present", [qualified, indexQualified]);
    if (present.rows[0]?.present === true) return new PgStore(pool, qualified);
    const ddl = `CREATE TABLE IF NOT EXISTS ${qualified} (
        key text COLLATE "C" PRIMARY KEY,
        recorded_at timestamptz NOT NULL DEFAULT now());
      CREATE INDEX IF NOT EXISTS ${index} ON ${qualified} (recorded_at)`;
    // Concurrent creates race on IF NOT EXISTS (its check and create are not atomic): the
    // loser's duplicate error is retried once, when the table exists.
    try {
      await pool.query(ddl);
    } catch {
      await pool.query(ddl);
    }
    return new PgStore(pool, qualified);
  }

  /**
   * Records `key` in the open transaction of `client` unless it is recorded, and answers
   * whether this call recorded it. The record commits or rolls back with the transaction.
   */
  async claimTx(client: PgClient, key: string): Promise<boolean> {
    const r = await client.query(`INSERT INTO ${this.table} (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`, [key]);
    return r.rowCount === 1;
  }

  /**
   * Runs `fn` exactly once per key for its writes through `client`: begins a transaction,
   * records the key and, when it was new, calls fn and commits. Resolves `false` when the key
   * was already recorded (the work is done: ack the message); nothing is written then. When
   * fn throws, the transaction rolls back (the key is not recorded, a retry runs fn again)
   * and the error propagates. fn must write only through `client`.
   */
  async inTx(key: string, fn: (client: PgClient) => Promise<void>): Promise<boolean> {
    if (key === "") throw new Error("sluice: empty idempotency key");
    const client = await this.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query("BEGIN");
      try {
        if (!(await this.claimTx(client, key))) {
          await client.query("ROLLBACK");
          return false;
        }
        await fn(client);
        await client.query("COMMIT");
        return true;
      } catch (err) {
        await client.query("ROLLBACK").catch((e: Error) => (broken = e));
        throw err;
      }
    } finally {
      client.release(broken);
    }
  }

  /** Records `key` unless it is recorded, outside any transaction of yours; answers whether this call recorded it. */
  async claim(key: string): Promise<boolean> {
    const r = await this.pool.query(`INSERT INTO ${this.table} (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`, [key]);
    return r.rowCount === 1;
  }

  /** Whether `key` is recorded. */
  async seen(key: string): Promise<boolean> {
    const r = await this.pool.query(`SELECT 1 FROM ${this.table} WHERE key = $1`, [key]);
    return (r.rowCount ?? 0) > 0;
  }

  /** Removes `key`'s record (a key not recorded is no error). */
  async forget(key: string): Promise<void> {
    await this.pool.query(`DELETE FROM ${this.table} WHERE key = $1`, [key]);
  }

  /** Deletes the keys recorded before `olderThan`; answers how many. */
  async prune(olderThan: Date): Promise<number> {
    const r = await this.pool.query(`DELETE FROM ${this.table} WHERE recorded_at < $1`, [olderThan]);
    return r.rowCount ?? 0;
  }
}

/**
 * A store of the keys whose work is done or taken, for effects outside the database
 * ({@link runOnce}). A key is recorded at most once however many callers race.
 */
export interface KeyStore {
  /** Records key unless it is recorded, and answers whether this call recorded it. */
  claim(key: string): Promise<boolean>;
  /** Whether key is recorded. */
  seen(key: string): Promise<boolean>;
  /** Removes key's record, so that a later claim succeeds. */
  forget(key: string): Promise<void>;
}

/** An unbounded key store in memory, for tests. */
export class MemoryStore implements KeyStore {
  private readonly keys = new Set<string>();
  async claim(key: string): Promise<boolean> {
    if (this.keys.has(key)) return false;
    this.keys.add(key);
    return true;
  }
  async seen(key: string): Promise<boolean> {
    return this.keys.has(key);
  }
  async forget(key: string): Promise<void> {
    this.keys.delete(key);
  }
}

/**
 * The order of the key's record and an effect outside the database. There is no default:
 * `"at-most-once"` records the key, then runs the effect (a crash after the record skips it
 * for good); `"at-least-once"` runs the effect, then records the key (a crash between them
 * runs it again, and two deliveries at once may both run it).
 */
export type Mode = "at-most-once" | "at-least-once";

/**
 * An at-most-once effect's failure after which the effect may have happened (a timeout after
 * the request left): {@link runOnce} keeps the key, so the effect is never tried again.
 */
export class UncertainError extends Error {
  constructor(cause: unknown) {
    super(`effect may have happened: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
    this.name = "UncertainError";
  }
}

/** `throw uncertain(err)`: see {@link UncertainError}. */
export function uncertain(cause: unknown): UncertainError {
  return new UncertainError(cause);
}

/**
 * Runs `fn` for `key` at most once, or until it succeeds once, as `store` records; resolves
 * whether fn ran (`false`: the key was done already, ack the message).
 *
 * At most once: claims the key, then runs fn. When fn throws, the key is forgotten so that
 * a retry runs it again (a throw says the effect did not happen), unless what it threw is an
 * {@link UncertainError}, which keeps the key. At least once: runs fn unless the key is
 * recorded, and records it after fn succeeded.
 */
export async function runOnce(store: KeyStore, key: string, mode: Mode, fn: () => Promise<void>): Promise<boolean> {
  if (key === "") throw new Error("sluice: empty idempotency key");
  if (mode === "at-most-once") {
    if (!(await store.claim(key))) return false;
    try {
      await fn();
    } catch (err) {
      if (!(err instanceof UncertainError)) {
        try {
          await store.forget(key);
        } catch (ferr) {
          throw new AggregateError([err, ferr], `sluice: forget key ${JSON.stringify(key)} after the failure (it stays claimed: the effect will not be retried)`);
        }
      }
      throw err;
    }
    return true;
  }
  if (mode === "at-least-once") {
    if (await store.seen(key)) return false;
    await fn();
    await store.claim(key);
    return true;
  }
  throw new RangeError(`sluice: mode ${JSON.stringify(mode)}: choose "at-most-once" (key first: a crash may skip the effect) or "at-least-once" (key after: a crash may repeat it)`);
}

/**
 * Runs a handler through {@link runOnce}, keyed by {@link idempotencyKey}: a message whose key
 * is done is acked without calling the handler. What the handler throws passes through
 * unchanged (the pool nacks, snoozes or dead-letters as usual).
 */
export function onceByKey(store: KeyStore, mode: Mode, handler: Handler): Handler {
  return async (message, ctx) => {
    await runOnce(store, idempotencyKey(message), mode, async () => handler(message, ctx));
  };
}
