// Test harness: a real broker (the repository's sluice binary) on a free port with a
// temporary data directory, PostgreSQL databases made and dropped per run, and polling with
// deadlines.

import { ChildProcess, execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestContext } from "node:test";

import pg from "pg";

/** The repository's root (this file runs as dist/test/harness.js). */
export const repoRoot = fileURLToPath(new URL("../../../../", import.meta.url));

/**
 * The sluice binary: SLUICE_BIN, else built from the repository into dist/, one per test
 * process (test files may run at once), removed when the process exits.
 */
export function sluiceBin(): string {
  const env = process.env.SLUICE_BIN;
  if (env) return env;
  const out = fileURLToPath(new URL(`../sluice-test-broker-${process.pid}`, import.meta.url));
  execFileSync("go", ["build", "-o", out, "./cmd/sluice"], { cwd: repoRoot, stdio: "inherit" });
  process.once("exit", () => rmSync(out, { force: true }));
  return out;
}

/** A broker started for a test. */
export interface Broker {
  url: string;
  /** Its data directory. */
  data: string;
  /** Stops it (SIGTERM) and removes its data directory unless `keepData`. */
  stop(keepData?: boolean): Promise<void>;
}

/**
 * Starts `sluice serve` on a free port with its own data directory, or on `addr` with the
 * data directory `data` (a restart).
 */
export async function startBroker(bin: string, o: { addr?: string; data?: string } = {}): Promise<Broker> {
  const data = o.data ?? mkdtempSync(join(tmpdir(), "sluice-ts-"));
  const p = spawn(bin, ["serve", "--addr", o.addr ?? "127.0.0.1:0", "--data", data], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sluice serve did not listen within 60 s:\n${log}`)), 60_000);
    const onData = (b: Buffer) => {
      log += b.toString();
      const m = /sluice listening on (\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(`http://${m[1]}`);
      }
    };
    p.stdout!.on("data", onData);
    p.stderr!.on("data", (b: Buffer) => (log += b.toString()));
    p.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`sluice serve exited (${code}):\n${log}`));
    });
  });
  return {
    url,
    data,
    stop: async (keepData = false) => {
      await stopProcess(p);
      if (!keepData) rmSync(data, { recursive: true, force: true });
    },
  };
}

/** Sends SIGTERM and waits for the exit (SIGKILL after 30 s). */
export function stopProcess(p: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<number | null> {
  if (p.exitCode !== null || p.signalCode !== null) return Promise.resolve(p.exitCode);
  return new Promise((resolve) => {
    const t = setTimeout(() => p.kill("SIGKILL"), 30_000);
    p.once("exit", (code) => {
      clearTimeout(t);
      resolve(code);
    });
    p.kill(signal);
  });
}

/** Polls `cond` until it holds, failing with `what` after `timeoutMs`. */
export async function eventually(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let delay = 10;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(200, delay * 2);
  }
}

/** A unique queue name. */
export function queueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/** Whether SLUICE_REQUIRE names `part` (then a missing part fails instead of skipping). */
export function required(part: string): boolean {
  return (process.env.SLUICE_REQUIRE ?? "").split(",").map((s) => s.trim()).includes(part);
}

/** The PostgreSQL server's maintenance database (SLUICE_TEST_POSTGRES, else the local one). */
export function adminURL(): string {
  return process.env.SLUICE_TEST_POSTGRES ?? "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable";
}

/**
 * Creates a database for the test and drops it after; skips the test with the reason when
 * PostgreSQL cannot be reached (fails when SLUICE_REQUIRE names postgres). Answers its URL,
 * or undefined when skipped.
 */
export async function database(t: TestContext): Promise<string | undefined> {
  const admin = new pg.Client({ connectionString: adminURL(), connectionTimeoutMillis: 5000 });
  try {
    await admin.connect();
  } catch (err) {
    const why = `PostgreSQL at ${adminURL()} is unreachable (${(err as Error).message}); set SLUICE_TEST_POSTGRES`;
    if (required("postgres")) throw new Error(`${why} (SLUICE_REQUIRE names postgres)`);
    console.log(`skip: ${why}`);
    t.skip(why);
    return undefined;
  }
  const name = `sluice_ts_${randomBytes(6).toString("hex")}`;
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  t.after(async () => {
    const a = new pg.Client({ connectionString: adminURL() });
    await a.connect();
    await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await a.end();
  });
  const u = new URL(adminURL());
  u.pathname = "/" + name;
  return u.toString();
}

