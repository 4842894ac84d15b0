// Owner outboxes: owners/<ownerId>/outbox.jsonl, an append-only log of deliveries (queued → sent → acked) that
// survives a daemon crash; the latest record per delivery id is its state.
import { existsSync } from "node:fs";
import { statSync } from "node:fs";
import { mkdir, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import {
  appendJsonLinesAt,
  fsError,
  parseJsonLines,
  readBoundedSync,
  readJsonLines,
  type SyncOptions,
} from "./fsio.js";

export type DeliveryState = "queued" | "sent" | "acked" | "expired";

export interface OutboxRecord {
  deliveryId: string;
  state: DeliveryState;
  ts: number;
  taskId?: string;
  /** The delivery itself, carried on the `queued` record. */
  payload?: unknown;
  [key: string]: unknown;
}

const OWNER_ID = /^[A-Za-z0-9._-]{1,128}$/;

/** pi session ids are UUIDs; `cli` is the person. Never a path separator, never `.` or `..`. */
export function isValidOwnerId(s: unknown): s is string {
  return typeof s === "string" && OWNER_ID.test(s) && s !== "." && s !== "..";
}

export function assertOwnerId(s: unknown): string {
  if (!isValidOwnerId(s)) {
    const shown = typeof s === "string" ? JSON.stringify(s.slice(0, 40)) : typeof s;
    throw new DshError(
      "BAD_PARAMS",
      `${shown} is not an owner id; use 1-128 of [A-Za-z0-9._-] (a pi session id, or "cli").`,
    );
  }
  return s;
}

export function outboxPath(home: string, ownerId: unknown): string {
  return join(home, "owners", assertOwnerId(ownerId), "outbox.jsonl");
}

export async function appendOutbox(
  home: string,
  ownerId: unknown,
  record: Omit<OutboxRecord, "ts"> & { ts?: number },
): Promise<void> {
  await appendOutboxMany(home, ownerId, [record]);
}

/** Makes bytes already appended to a file durable (the daemon's commit log, src/store/commit-log.ts). */
export type MakeDurable = (path: string, at: number, text: string) => Promise<void>;

/**
 * Append records in order with one write and one fsync (unless `sync: false`); resolves with the file's new size.
 * With `durable` the fsync is the commit log's, shared with every journal record written meanwhile and ordered
 * after them: an outbox record is never durable without the settle record written before it.
 */
export async function appendOutboxMany(
  home: string,
  ownerId: unknown,
  records: (Omit<OutboxRecord, "ts"> & { ts?: number })[],
  opts: SyncOptions & { durable?: MakeDurable; onWritten?: (size: number) => void } = {},
): Promise<number> {
  const path = outboxPath(home, ownerId);
  const dir = join(home, "owners", ownerId as string);
  const now = Date.now();
  const lines = records.map((r) => ({ ts: now, ...r }));
  const viaLog = opts.durable !== undefined && opts.sync !== false;
  const append = viaLog ? { sync: false } : opts;
  let r: { size: number; at: number; text: string };
  if (ownerDirs.has(dir)) {
    try {
      r = await appendJsonLinesAt(path, lines, append);
    } catch (e) {
      // Its directory may have been removed since (owner gc): make it again once, below.
      ownerDirs.delete(dir);
      if (existsSync(dir)) throw e;
      r = await appendInNewDir(dir, path, lines, append, ownerId);
    }
  } else r = await appendInNewDir(dir, path, lines, append, ownerId);
  opts.onWritten?.(r.size);
  if (viaLog && r.at >= 0) await opts.durable!(path, r.at, r.text);
  for (const rec of records) outboxAppended?.(rec.state as DeliveryState);
  return r.size;
}

/** Owner directories this process made or found: the append does not mkdir each time. */
const ownerDirs = new Set<string>();

async function appendInNewDir(
  dir: string,
  path: string,
  lines: unknown[],
  opts: SyncOptions,
  ownerId: unknown,
): Promise<{ size: number; at: number; text: string }> {
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw fsError(e, `create the outbox of ${String(ownerId)}`);
  }
  const r = await appendJsonLinesAt(path, lines, opts);
  ownerDirs.add(dir);
  return r;
}

/** Test-only: called after each outbox record is written (fsynced unless the append said not to) (the daemon's crash hook; unset otherwise). */
let outboxAppended: ((state: DeliveryState) => void) | undefined;
export function onOutboxAppended(fn: ((state: DeliveryState) => void) | undefined): void {
  outboxAppended = fn;
}

export function readOutbox(home: string, ownerId: unknown): Promise<OutboxRecord[]> {
  return readJsonLines<OutboxRecord>(outboxPath(home, ownerId));
}

/** The outbox and the number of bytes it was read from (a later size that differs means someone appended). */
export async function readOutboxSized(
  home: string,
  ownerId: unknown,
): Promise<{ records: OutboxRecord[]; size: number }> {
  // A regular file within the bound, opened without blocking (fsio.ts); missing: empty.
  const buf = readBoundedSync(outboxPath(home, ownerId));
  if (buf === undefined) return { records: [], size: 0 };
  return { records: parseJsonLines<OutboxRecord>(buf.toString("utf8")), size: buf.length };
}

/** The outbox file's size in bytes, 0 when it does not exist yet (a stat of a path: synchronous, see fsio.ts). */
export async function outboxSize(home: string, ownerId: unknown): Promise<number> {
  try {
    return statSync(outboxPath(home, ownerId)).size;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return 0;
    throw fsError(e, `stat the outbox of ${String(ownerId)}`);
  }
}

/** Deliveries not yet acked (nor expired), in queue order, each as its `queued` record with the latest state. */
export function pendingDeliveries(records: OutboxRecord[]): OutboxRecord[] {
  const queued = new Map<string, OutboxRecord>();
  const latest = new Map<string, DeliveryState>();
  for (const r of records) {
    if (typeof r?.deliveryId !== "string") continue;
    if (r.state === "queued" && !queued.has(r.deliveryId)) queued.set(r.deliveryId, r);
    latest.set(r.deliveryId, r.state);
  }
  const out: OutboxRecord[] = [];
  for (const [id, q] of queued) {
    const state = latest.get(id) ?? "queued";
    if (state !== "acked" && state !== "expired") out.push({ ...q, state });
  }
  return out;
}

/**
 * Remove an owner's directory (its secret and its outbox): the caller found nothing live in it (src/daemon/delivery/owner-gc.ts).
 * A later append makes it again.
 */
export async function removeOwnerDir(home: string, ownerId: unknown): Promise<void> {
  const dir = join(home, "owners", assertOwnerId(ownerId));
  ownerDirs.delete(dir);
  try {
    await rm(dir, { recursive: true, force: true });
  } catch (e) {
    throw fsError(e, `remove the idle owner directory ${dir}`);
  }
}

/** Owner ids that have an outbox directory. */
export async function listOwners(home: string): Promise<string[]> {
  const names = await readdir(join(home, "owners")).catch(() => [] as string[]);
  return names.filter(isValidOwnerId).sort();
}
