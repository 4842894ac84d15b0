// Injecting daemon deliveries into the owner's pi session, once each: results and errors as JSON custom messages
// with {deliverAs:"steer", triggerTurn:true}; aborts as TUI-only cards. A delivery id already in the session
// (or in flight in this process) is acknowledged without a second injection.
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { deliveryCycleOf, isExpired } from "../core/crew/crew-delivery.js";
import { cardMarkdown } from "./cards.js";
import type { OwnerLink, PushedDelivery } from "./owner-link.js";

export const RESULT_TYPE = "crew-result";
export const ABORT_TYPE = "crew-abort";

/**
 * What this session's entries already hold, in one pass over them: every delivery id (results and abort cards), and
 * the cycles (`<taskId>-c<cycle>`) whose outcome the model has. After a power cut the daemon may derive a settled
 * cycle again and word it otherwise (another delivery id: "error" where "completed" was heard); a cycle has one
 * outcome, so the first one heard stands.
 */
export function delivered(ctx: ExtensionContext): { ids: Set<string>; cycles: Set<string> } {
  const ids = new Set<string>();
  const cycles = new Set<string>();
  for (const e of ctx.sessionManager.getEntries() as unknown as Record<string, unknown>[]) {
    if (e.type !== "custom_message" || (e.customType !== RESULT_TYPE && e.customType !== ABORT_TYPE)) continue;
    const id = (e.details as { deliveryId?: unknown } | undefined)?.deliveryId;
    if (typeof id !== "string") continue;
    ids.add(id);
    if (e.customType === RESULT_TYPE) cycles.add(deliveryCycleOf(id));
  }
  return { ids, cycles };
}

export interface DeliveryInjectorDeps {
  pi: ExtensionAPI;
  link: OwnerLink;
  ctx(): ExtensionContext | undefined;
}

export class DeliveryInjector {
  /** Injected in this process but possibly not persisted yet (a steer waits for the tool batch to end). */
  private readonly inFlight = new Set<string>();
  /** The cycles of model-visible deliveries in `inFlight`. */
  private readonly inFlightCycles = new Set<string>();
  private chain: Promise<void> = Promise.resolve();
  /** Abort cards that arrived during an owner run: appended once the run ends, so they never feed a model call. */
  private held: { ownerId: string; content: string; details: Record<string, unknown> }[] = [];
  readonly injected: string[] = [];

  constructor(private readonly deps: DeliveryInjectorDeps) {}

  /** Serialized, so several pushes keep their order and each sees the previous one's effect. */
  push(d: PushedDelivery, ownerId: string): void {
    this.chain = this.chain.then(() => this.handle(d, ownerId)).catch(() => undefined);
  }

  /** Append held abort cards while the owner is idle (call after agent_end); otherwise keep them for the next end. */
  flushHeld(): void {
    const ctx = this.deps.ctx();
    if (!ctx || !ctx.isIdle()) return;
    const owner = ctx.sessionManager.getSessionId();
    // A card held for a session the person has since left is dropped: it was only ever a notice.
    for (const c of this.held.splice(0)) {
      if (c.ownerId === owner)
        this.deps.pi.sendMessage({ customType: ABORT_TYPE, content: c.content, display: true, details: c.details });
    }
  }

  private async ack(id: string, state: "acked" | "expired"): Promise<void> {
    await this.deps.link.request("owner.ack", { deliveryIds: [id], state }, 10_000).catch(() => undefined);
  }

  private async handle(d: PushedDelivery, ownerId: string): Promise<void> {
    const ctx = this.deps.ctx();
    // A push for a session we left: the daemon keeps it queued for that owner's return.
    if (!ctx || ctx.sessionManager.getSessionId() !== ownerId) return;
    const seen = delivered(ctx);
    if (this.inFlight.has(d.deliveryId) || seen.ids.has(d.deliveryId)) {
      await this.ack(d.deliveryId, "acked");
      return;
    }
    const cycle = deliveryCycleOf(d.deliveryId);
    if (d.model !== null && (this.inFlightCycles.has(cycle) || seen.cycles.has(cycle))) {
      await this.ack(d.deliveryId, "acked"); // this cycle's outcome is already in the session
      return;
    }
    if (isExpired(d.queuedAt, Date.now())) {
      await this.ack(d.deliveryId, "expired");
      return;
    }
    this.inFlight.add(d.deliveryId);
    if (d.model !== null) this.inFlightCycles.add(cycle);
    const details = { deliveryId: d.deliveryId, card: d.card };
    if (d.model === null) {
      // Aborts: a card for the person, never model context (the context hook drops it) and never a turn. During a
      // run, a steer or follow-up would make pi call the model once more, so the card waits for the run's end.
      this.held.push({ ownerId, content: cardMarkdown(d.card), details });
      if (ctx.isIdle()) this.flushHeld();
    } else {
      this.deps.pi.sendMessage(
        { customType: RESULT_TYPE, content: JSON.stringify(d.model), display: true, details },
        { deliverAs: "steer", triggerTurn: true },
      );
    }
    this.injected.push(d.deliveryId);
    await this.ack(d.deliveryId, "acked");
  }
}
