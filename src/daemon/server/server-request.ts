// One request frame, one reply: JSON and nesting checks, the {id, method, params} shape, params and result checked
// against the protocol schemas, and the error reply (an INTERNAL failure is logged with its stack).
import { DshError, asDshError } from "../../core/errors.js";
import { dispatch, hello, type HelloParams } from "./server-access.js";
import type { Connection, SocketServerOptions } from "./server-types.js";

const MAX_NESTING = 64;

/** Deepest [ / { nesting of a JSON text, ignoring brackets inside strings; one pass, no recursion. */
export function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // backslash: skip the escaped char
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 91 || c === 123) max = Math.max(max, ++depth);
    else if (c === 93 || c === 125) depth--;
  }
  return max;
}

/** Answers one frame's text through send: a result or an error, never a throw. */
export async function handleFrame(
  text: string,
  conn: Connection,
  send: (msg: unknown) => void,
  opts: SocketServerOptions,
): Promise<void> {
  const fail = (id: unknown, e: DshError) => send({ id: id ?? null, error: e.toWire() });
  let msg: unknown;
  try {
    msg = JSON.parse(text);
  } catch {
    fail(null, new DshError("BAD_REQUEST", "frame is not valid JSON; send one JSON object per line"));
    return;
  }
  if (nestingDepth(text) > MAX_NESTING) {
    // Deep values would overflow the stack of whatever walks them later (logging, journaling, schemas).
    fail(
      null,
      new DshError(
        "BAD_REQUEST",
        `frame nests deeper than ${MAX_NESTING} levels; send flat params as documented in docs/socket-protocol.md`,
      ),
    );
    return;
  }
  if (typeof msg !== "object" || msg === null || Array.isArray(msg)) {
    fail(null, new DshError("BAD_REQUEST", "frame must be a JSON object {id, method, params}"));
    return;
  }
  const { id, method, params } = msg as { id?: unknown; method?: unknown; params?: unknown };
  if (typeof id !== "string" && typeof id !== "number") {
    fail(null, new DshError("BAD_REQUEST", "request needs an id (string or number) so the reply can be matched"));
    return;
  }
  try {
    if (typeof method !== "string" || !opts.schemas.isMethod(method)) {
      throw new DshError(
        "UNKNOWN_METHOD",
        `unknown method ${JSON.stringify(method)}; see docs/socket-protocol.md for the methods`,
      );
    }
    const p = params === undefined ? {} : params;
    opts.schemas.checkParams(method, p);
    const result =
      method === "hello" ? await hello(p as HelloParams, conn, opts) : await dispatch(method, p, conn, opts);
    opts.schemas.checkResult(method, result);
    send({ id, result });
  } catch (e) {
    const err = asDshError(e);
    if (err.code === "INTERNAL")
      opts.log.error({ method, err: err.message, stack: (e as Error).stack }, "handler failed");
    fail(id, err);
  }
}
