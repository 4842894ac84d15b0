// The Herdr runtime's public surface.
export { createHerdrRuntime, herdrKey, type HerdrRuntimeOptions } from "./runtime.js";
export {
  herdrPing,
  HerdrClient,
  createTransport,
  MIN_PROTOCOL,
  type HerdrClientOptions,
  type PingOutcome,
  type ServerInfo,
} from "./client.js";
export { resolveHerdrSocketPath } from "./socket-path.js";
export { workspaceLabel } from "./topology.js";
export type { HerdrTransport, HerdrEvent, HerdrResult } from "./transport.js";
