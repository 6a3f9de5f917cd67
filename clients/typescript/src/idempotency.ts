/**
 * Exactly once where it matters: a message's idempotency key, and a PostgreSQL store that
 * records it in the transaction of the handler's own writes (the Go `pgstore`'s table, so Go
 * and TypeScript workers can share it).
 *
 * @packageDocumentation
 */

import type { Attribute } from "./client.js";

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
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null }>;
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
export class PgStore {
  private constructor(private readonly pool: PgPool, private readonly table: string) {}

  /** Makes a store on `pool` (a `pg.Pool`, which stays the caller's), creating its table when missing. */
  static async create(pool: PgPool, options: PgStoreOptions = {}): Promise<PgStore> {
    const table = options.table ?? DEFAULT_TABLE;
    if (!ident.test(table)) throw new RangeError(`sluice: PgStoreOptions.table ${JSON.stringify(table)}: use 1..63 letters, digits or underscores, not starting with a digit`);
    if (options.schema !== undefined && !ident.test(options.schema)) {
      throw new RangeError(`sluice: PgStoreOptions.schema ${JSON.stringify(options.schema)}: use 1..63 letters, digits or underscores, not starting with a digit`);
    }
    const qualified = options.schema ? `${quote(options.schema)}.${quote(table)}` : quote(table);
    const index = quote(table.slice(0, 63 - "_recorded_at".length) + "_recorded_at");
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

  /** Deletes the keys recorded before `olderThan`; answers how many. */
  async prune(olderThan: Date): Promise<number> {
    const r = await this.pool.query(`DELETE FROM ${this.table} WHERE recorded_at < $1`, [olderThan]);
    return r.rowCount ?? 0;
  }
}
