// Owner secrets: proof that a session descends from an owner. The daemon issues one at an owner's first attach and
// keeps only its sha256 (owners/<ownerId>/secret.sha256, 0600); the owner extension keeps the secret in its pi
// session as a custom entry, which /fork and /clone copy, and presents it to owner.move.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { assertOwnerId } from "./outbox.js";
import { fsError } from "./fsio.js";

const digest = (secret: string) => createHash("sha256").update(secret, "utf8").digest();

function secretPath(home: string, ownerId: string): string {
  return join(home, "owners", assertOwnerId(ownerId), "secret.sha256");
}

/** A new secret when the owner has none yet (returned once, never again); undefined when it already has one. */
export async function issueOwnerSecret(home: string, ownerId: string): Promise<string | undefined> {
  const path = secretPath(home, ownerId);
  const secret = randomBytes(32).toString("hex");
  try {
    await mkdir(join(home, "owners", ownerId), { recursive: true, mode: 0o700 });
    // wx: of two attaches at once, one issues; the file is never overwritten.
    await writeFile(path, digest(secret).toString("hex") + "\n", { flag: "wx", mode: 0o600 });
    return secret;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "EEXIST") return undefined;
    throw fsError(e, `record the owner secret of ${ownerId}`);
  }
}

/** True when `secret` is the one issued to ownerId. */
export async function checkOwnerSecret(home: string, ownerId: string, secret: string | undefined): Promise<boolean> {
  if (secret === undefined || secret === "") return false;
  const stored = await readFile(secretPath(home, ownerId), "utf8").catch(() => undefined);
  if (stored === undefined) return false;
  const want = Buffer.from(stored.trim(), "hex");
  const got = digest(secret);
  return want.length === got.length && timingSafeEqual(want, got);
}
