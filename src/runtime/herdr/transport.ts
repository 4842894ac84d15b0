// What the Herdr runtime needs from a way of reaching Herdr: the local socket, or the `herdr` CLI for --machine.
export type HerdrResult = { type: string; [key: string]: unknown };

/** A pushed subscription line: lifecycle `{event:"pane_closed",data:{type,...}}` or `{event:"pane.agent_status_changed",data}`. */
export interface HerdrEvent {
  event: string;
  data: Record<string, unknown>;
}

export interface HerdrSubscription {
  close(): void;
}

export interface SubscribeHandlers {
  onEvent(e: HerdrEvent): void;
  /** The stream ended (server closed it, dropped, or sent a malformed line). Not called after close(). */
  onEnd(err?: Error): void;
}

export interface HerdrTransport {
  readonly kind: "socket" | "cli";
  /** One request; resolves with `result`, rejects with a DshError. */
  request(method: string, params: Record<string, unknown>, opts?: { timeoutMs?: number }): Promise<HerdrResult>;
  /** Resolves once the subscription is acknowledged; undefined when the transport cannot stream events. */
  subscribe?(subscriptions: Record<string, unknown>[], handlers: SubscribeHandlers): Promise<HerdrSubscription>;
}

export const DEFAULT_TIMEOUT_MS = 10_000;

/** The oldest Herdr protocol the runtime speaks (Herdr 0.8.x); 0.9 speaks 22. */
export const MIN_PROTOCOL = 20;
