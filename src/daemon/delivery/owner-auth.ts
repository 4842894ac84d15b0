// Owners prove who they are: every `hello {kind:"owner", ownerId, secret}` is checked against the secret on record for
// that owner (src/store/owner-secret.ts); an owner without one has the secret it presents recorded, or is issued one
// at this hello when it presents none (a new session, one whose directory was collected, or a session from before
// owners proved themselves: its tasks stay its own). A hello
// without the right proof is NOT_OWNER. The connections each owner has open are counted, so its directory (where the
// secret lives) is collected only once none is left and it has no work.
import { DshError } from "../../core/errors.js";
import { proveOwner } from "../../store/owner-secret.js";
import { ownerLabel } from "./owner-view.js";
import type { Connection, Logger } from "../server/server-types.js";

export interface OwnerAuthOptions {
  home: string;
  log: Logger;
  /** The owner's last connection closed (owner-gc.ts may remove its directory). */
  onIdle?(owner: string): void;
}

export class OwnerAuth {
  private readonly open = new Map<string, number>();

  constructor(private readonly opts: OwnerAuthOptions) {}

  /** Some connection speaks for this owner now. */
  connected(owner: string): boolean {
    return (this.open.get(owner) ?? 0) > 0;
  }

  async hello(conn: Connection, ownerId: string, secret: string | undefined): Promise<{ secret?: string }> {
    if (ownerId === "cli")
      throw new DshError(
        "BAD_PARAMS",
        'ownerId "cli" is the CLI\'s: an owner is a pi session (its session id); say hello {kind:"cli"} to act as the CLI',
      );
    const r = await proveOwner(this.opts.home, ownerId, secret);
    if (!r.proven) {
      // The label, not the id, and never what was presented.
      this.opts.log.warn(
        { conn: conn.id, owner: ownerLabel(ownerId), code: "NOT_OWNER", proof: secret ? "wrong" : "none" },
        "owner hello refused: no proof of that owner",
      );
      throw new DshError(
        "NOT_OWNER",
        `hello as owner ${ownerId} needs that owner's secret ("secret" in hello): the daemon recorded it at the owner's first hello and its owner extension keeps it in the pi session; another process cannot speak for that session. A session whose secret is lost keeps its tasks: act on them from the CLI`,
      );
    }
    if (r.issued !== undefined || r.recorded)
      this.opts.log.info(
        { conn: conn.id, owner: ownerLabel(ownerId), how: r.recorded ? "chosen by the owner" : "issued" },
        "owner secret recorded",
      );
    if (conn.closed) {
      // Gone while its proof was read: its close hooks ran already, so nothing of it is counted.
      this.opts.onIdle?.(ownerId);
      return {};
    }
    this.open.set(ownerId, (this.open.get(ownerId) ?? 0) + 1);
    conn.onClose(() => {
      const n = (this.open.get(ownerId) ?? 1) - 1;
      if (n > 0) return void this.open.set(ownerId, n);
      this.open.delete(ownerId);
      this.opts.onIdle?.(ownerId);
    });
    return r.issued !== undefined ? { secret: r.issued } : {};
  }
}
