// Owner secrets: proof that a connection speaks for an owner (a pi session), and that a session descends from one.
// An owner's first hello records the secret it presents (or, presenting none, is issued one); the daemon keeps only its sha256 (owners/<ownerId>/secret.sha256, 0600);
// the owner extension keeps the secret in its pi session as a custom entry, which /fork and /clone copy, and
// presents it on every hello and to owner.move. Secrets are never logged.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { assertOwnerId } from "./outbox.js";
import { fsError } from "./fsio.js";

const digest = (secret: string) => createHash("sha256").update(secret, "utf8").digest();

function secretPath(home: string, ownerId: string): string {
  return join(home, "owners", assertOwnerId(ownerId), "secret.sha256");
}

/**
 * Record ownerId's secret when it has none yet: the one its hello presented (the owner extension chooses its own
 * before its first hello, so a reply lost to a crash cannot leave it without the proof the daemon recorded), else a
 * new one (an older extension), returned once. `undefined` when a secret was on record already (a race).
 */
export async function issueOwnerSecret(
  home: string,
  ownerId: string,
  presented?: string,
): Promise<{ secret: string; chosen: boolean } | undefined> {
  const path = secretPath(home, ownerId);
  const chosen = presented !== undefined && presented !== "";
  const secret = chosen ? presented : randomBytes(32).toString("hex");
  try {
    await mkdir(join(home, "owners", ownerId), { recursive: true, mode: 0o700 });
    // wx: of two hellos at once, one records; the file is never overwritten.
    await writeFile(path, digest(secret).toString("hex") + "\n", { flag: "wx", mode: 0o600 });
    return { secret, chosen };
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return undefined;
    throw fsError(e, `record the owner secret of ${ownerId}`);
  }
}

/** The stored digest of ownerId's secret; undefined when it has none (never issued, or its directory collected). */
async function storedDigest(home: string, ownerId: string): Promise<Buffer | undefined> {
  const stored = await readFile(secretPath(home, ownerId), "utf8").catch((e: NodeJS.ErrnoException) => {
    if (e.code === "ENOENT") return undefined;
    throw fsError(e, `read the owner secret of ${ownerId}`);
  });
  return stored === undefined ? undefined : Buffer.from(stored.trim(), "hex");
}

/** True when `secret` is the one issued to ownerId (timing-safe: compares sha256 digests). */
export async function checkOwnerSecret(home: string, ownerId: string, secret: string | undefined): Promise<boolean> {
  if (secret === undefined || secret === "") return false;
  const want = await storedDigest(home, ownerId).catch(() => undefined);
  if (want === undefined) return false;
  const got = digest(secret);
  return want.length === got.length && timingSafeEqual(want, got);
}

/**
 * An owner's hello: with a secret on record, `secret` must be it (`proven`). An owner without one (new, one whose
 * directory was collected, or one from before owners proved themselves) has the secret it presents recorded, or,
 * presenting none, is issued one now (`issued`, returned this once).
 */
export async function proveOwner(
  home: string,
  ownerId: string,
  secret: string | undefined,
): Promise<{ proven: true; issued?: string; recorded?: boolean } | { proven: false }> {
  if ((await storedDigest(home, ownerId)) === undefined) {
    const rec = await issueOwnerSecret(home, ownerId, secret);
    if (rec !== undefined) return rec.chosen ? { proven: true, recorded: true } : { proven: true, issued: rec.secret };
    // Another hello recorded one just now: this one must prove it like any later one.
  }
  return (await checkOwnerSecret(home, ownerId, secret)) ? { proven: true } : { proven: false };
}
