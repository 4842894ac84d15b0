// What the socket's method handlers (methods.ts, spawn-method.ts, delivery-methods.ts) are given: a type only, so
// the handler modules import neither each other's types nor the daemon.
import type { RuntimeKind } from "../../core/types.js";
import type { Result } from "../../protocol/methods.js";
import type { Relay } from "../relay/relay.js";
import type { Supervisor } from "../task/supervisor-types.js";

export interface MethodContext {
  sup: Supervisor;
  defaultRuntime(): Promise<RuntimeKind>;
  status(): Result<"daemon.status">;
  stop(): void;
  externalAgents?(): Promise<NonNullable<Result<"task.list">["external"]>>;
  /** Tasks on other machines (src/daemon/relay/relay.ts); absent in tests that build handlers without one. */
  relay?: Relay;
}
