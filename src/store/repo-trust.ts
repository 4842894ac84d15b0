// Consent for a repository's own commands: a `.dsh-herdr.json` shipped with a repository (cloned, pulled) names
// commands (setup, checks) and files to copy (include) that the daemon would run and copy for every spawn there.
// They apply only once the person trusts that file's exact content (`dsh-herdr repo trust`): the trust is the file's
// sha256, kept per repository root in <home>/repo-trust.json; a changed file is untrusted again until trusted anew.
// config.json `repos.<root>` and a spawn's own flags are the person's own words and need no trust.
import { createHash } from "node:crypto";
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { readBoundedSync, writeAtomic } from "./fsio.js";

export const REPO_TRUST_FILE = "repo-trust.json";
const MAX_BYTES = 4 * 1024 * 1024;

export interface TrustEntry {
  /** sha256 (hex) of the .dsh-herdr.json bytes that were trusted. */
  sha256: string;
  /** When (ISO time). */
  at: string;
}

/** Repository root (its real path) → the trusted content. */
export type TrustBook = Record<string, TrustEntry>;

/** Whether the file's current content is the trusted one. */
export type TrustState = "trusted" | "untrusted" | "changed";

export function sha256Of(buf: Buffer): string {
  return createHash("sha256").update(buf).digest("hex");
}

/** The key of a root: its real path (git prints real paths; a path given by hand may go through a symlink). */
export function trustKey(root: string): string {
  try {
    return realpathSync(root);
  } catch {
    return root;
  }
}

function bookPath(home: string): string {
  return join(home, REPO_TRUST_FILE);
}

/** The trust book of the home ({} when there is none). */
export function readTrustBook(home: string): TrustBook {
  const path = bookPath(home);
  const buf = readBoundedSync(path, {
    maxBytes: MAX_BYTES,
    refuse: (why) => new DshError("CONFIG_INVALID", `${path} ${why}; delete it and trust the repositories again`),
  });
  if (buf === undefined) return {};
  try {
    const parsed = JSON.parse(buf.toString("utf8")) as { repos?: unknown };
    const out: TrustBook = {};
    if (parsed && typeof parsed.repos === "object" && parsed.repos !== null)
      for (const [root, e] of Object.entries(parsed.repos as Record<string, Partial<TrustEntry>>))
        if (typeof e?.sha256 === "string" && /^[0-9a-f]{64}$/.test(e.sha256))
          out[root] = { sha256: e.sha256, at: typeof e.at === "string" ? e.at : "" };
    return out;
  } catch (e) {
    throw new DshError(
      "CONFIG_INVALID",
      `${path} is not valid JSON (${(e as Error).message}); delete it and trust the repositories again (dsh-herdr repo trust)`,
    );
  }
}

/** Whether `sha256` is the content trusted for the repository at `root`. */
export function trustStateOf(book: TrustBook, root: string, sha256: string): TrustState {
  const e = book[trustKey(root)] ?? book[root];
  return e === undefined ? "untrusted" : e.sha256 === sha256 ? "trusted" : "changed";
}

/** Record (sha256 given) or drop (undefined) the trust for a root; the book is replaced atomically. */
export async function setTrust(home: string, root: string, sha256: string | undefined): Promise<boolean> {
  const book = readTrustBook(home);
  const key = trustKey(root);
  const had = book[key] !== undefined;
  if (sha256 === undefined) delete book[key];
  else book[key] = { sha256, at: new Date().toISOString() };
  await writeAtomic(bookPath(home), `${JSON.stringify({ repos: book }, null, 2)}\n`);
  return had;
}
