// The label an owner is shown by to everyone but itself (src/daemon/delivery/owner-view.ts): its own module, so the socket's
// access layer can name an owner without importing the supervisor's types.
import { createHash } from "node:crypto";

/** The non-secret label of a pi owner (stable: the same id always gives the same label). */
export function ownerLabel(ownerId: string): string {
  return `pi-${createHash("sha256").update(ownerId, "utf8").digest("hex").slice(0, 12)}`;
}
