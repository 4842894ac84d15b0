// The socket protocol's one table of methods: the request methods the daemon answers and the pushes it sends.
// Their params and results are declared once, in schema/protocol/<method>.json; methods.generated.ts holds the
// TypeScript types generated from them (scripts/gen-protocol-types.mjs), read by the client's request<M> and the
// server's handler table. docs/socket-protocol.md lists the same methods (test/unit/protocol-types.test.ts).
import { LARGE_PROTOCOL } from "./frames.js";
import type { ProtocolMethods, ProtocolPushes } from "./methods.generated.js";

export type * from "./methods.generated.js";

/** 2: replies and pushes over the frame limit go by reference (frame.page; docs/socket-protocol.md, "Frames"). */
export const PROTOCOL_VERSION = LARGE_PROTOCOL;

export const REQUEST_METHODS = [
  "hello",
  "daemon.status",
  "daemon.stop",
  "task.spawn",
  "task.get",
  "task.list",
  "task.wait",
  "task.respond",
  "task.close",
  "task.abort",
  "task.subscribe",
  "task.patch",
  "task.follow",
  "task.fetch",
  "task.check",
  "task.land",
  "child.event",
  "child.report",
  "owner.attach",
  "owner.ack",
  "owner.move",
  "frame.page",
] as const;
export type RequestMethod = (typeof REQUEST_METHODS)[number];

export const PUSH_METHODS = [
  "task.status",
  "task.followed",
  "child.prompt",
  "child.steer",
  "child.abort",
  "owner.delivery",
] as const;

/** What a request method takes. */
export type Params<M extends RequestMethod> = ProtocolMethods[M]["params"];
/** What a request method answers. */
export type Result<M extends RequestMethod> = ProtocolMethods[M]["result"];
export type PushMethod = (typeof PUSH_METHODS)[number];
/** A push's params, where a schema declares them (unknown for the others). */
export type PushParams<P extends string> = P extends keyof ProtocolPushes ? ProtocolPushes[P] : unknown;
