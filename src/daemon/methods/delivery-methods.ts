// The owner.* socket methods: an owner extension attaches (its pending deliveries are pushed), acks what it
// injected, and on /fork or /clone takes over the open tasks and queued deliveries of the session it came from.
import { DshError } from "../../core/errors.js";
import { checkOwnerSecret } from "../../store/owner-secret.js";
import type { DeliveryService } from "../delivery/delivery.js";
import type { HandlerTable } from "../server/server.js";
import type { Supervisor } from "../task/supervisor-types.js";

export function createOwnerHandlers(
  sup: Supervisor,
  delivery: DeliveryService,
): Pick<HandlerTable, "owner.attach" | "owner.ack" | "owner.move"> {
  return {
    // The server lets only owner connections in (proven at hello: src/daemon/delivery/owner-auth.ts), so ownerId is set.
    "owner.attach": (_p, conn) => delivery.attach(conn),
    "owner.ack": (p, conn) => delivery.ack(conn, p.deliveryIds, p.state),
    "owner.move": async (p, conn) => {
      const to = conn.ownerId!;
      const moved_ids: string[] = [];
      if (p.fromOwnerId === to) return { moved_ids, deliveries: 0 };
      // Only a session that descends from the old one holds its secret (the owner extension's session entry).
      if (!(await checkOwnerSecret(sup.deps.home, p.fromOwnerId, p.secret))) {
        throw new DshError(
          "NOT_OWNER",
          `moving the work of owner ${p.fromOwnerId} needs the secret the daemon issued to its first hello; only a session forked or cloned from it (its owner extension keeps the secret in the session) may move it`,
        );
      }
      for (const live of sup.tasks.values()) {
        if (live.rec.owner !== p.fromOwnerId || !sup.isOpen(live)) continue;
        moved_ids.push(live.rec.taskId);
        await live.moveOwner(to); // the task's writer: record, result and journal, behind its harvests
      }
      const deliveries = await delivery.moveQueued(p.fromOwnerId, to);
      return { moved_ids, deliveries };
    },
  };
}
