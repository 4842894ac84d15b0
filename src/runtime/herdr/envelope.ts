// Checks one response line from Herdr: JSON, our id, and exactly a result or an error (reference/herdr.md §5).
import { DshError } from "../../core/errors.js";
import { herdrRejection } from "./errors.js";
import type { HerdrResult } from "./transport.js";

export function parseEnvelope(line: string, id: string, method: string): HerdrResult {
  let msg: unknown;
  try {
    msg = JSON.parse(line);
  } catch {
    throw protocolError(method, `a non-JSON line: ${clip(line)}`);
  }
  if (typeof msg !== "object" || msg === null || Array.isArray(msg))
    throw protocolError(method, `a non-object: ${clip(line)}`);
  const env = msg as { id?: unknown; result?: unknown; error?: unknown };
  const err = env.error as { code?: unknown; message?: unknown } | undefined;
  // A malformed request is answered with id "" by Herdr; accept that only for errors.
  if (env.id !== id && !(env.id === "" && err !== undefined)) {
    throw protocolError(method, `id ${JSON.stringify(env.id)} where ${JSON.stringify(id)} was expected`);
  }
  if (err !== undefined) {
    if (typeof err !== "object" || err === null || typeof err.code !== "string") {
      throw protocolError(method, `an error without a code: ${clip(line)}`);
    }
    throw herdrRejection(method, err.code, typeof err.message === "string" ? err.message : "");
  }
  const result = env.result as { type?: unknown } | undefined;
  if (typeof result !== "object" || result === null || typeof result.type !== "string") {
    throw protocolError(method, `neither a result with a type nor an error: ${clip(line)}`);
  }
  return result as HerdrResult;
}

export function protocolError(method: string, what: string): DshError {
  return new DshError(
    "HERDR_PROTOCOL",
    `Herdr answered ${method} with ${what}. Fix: check that the socket belongs to a Herdr server (protocol 20+) and that its version matches (herdr status --json)`,
    { method },
  );
}

function clip(s: string): string {
  return s.length > 120 ? `${s.slice(0, 120)}…` : s;
}
