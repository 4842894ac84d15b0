// Task ids and agent names. Pure: the caller supplies the clock and the random bytes.
import { DshError } from "./errors.js";
import type { Role } from "./types.js";

const TIME_CHARS = 8; // base36 ms fits 8 chars until the year 2059
const RANDOM_CHARS = 3;
const MAX_TIME = 36 ** TIME_CHARS - 1;
const TASK_ID = /^t[0-9a-z]{11}$/;

/**
 * A 12-char id: `t` + 8 base36 chars of time + 3 base36 chars of randomness. Fixed width, so ids made in a later
 * millisecond sort later as plain strings (directory listings read in creation order).
 */
export function newTaskId(nowMs: number, random: Uint8Array): string {
  if (!Number.isSafeInteger(nowMs) || nowMs < 0 || nowMs > MAX_TIME) {
    throw new DshError(
      "BAD_PARAMS",
      `newTaskId needs an epoch-ms integer in 0..${MAX_TIME}; got ${nowMs}. Pass Date.now().`,
    );
  }
  if (random.length < 3) {
    throw new DshError("BAD_PARAMS", "newTaskId needs at least 3 random bytes; pass crypto.randomBytes(3).");
  }
  const r = ((random[0]! << 16) | (random[1]! << 8) | random[2]!) % 36 ** RANDOM_CHARS;
  return "t" + nowMs.toString(36).padStart(TIME_CHARS, "0") + r.toString(36).padStart(RANDOM_CHARS, "0");
}

/** Exactly the shape newTaskId makes; anything else (paths, empty, over-long) is refused. */
export function isValidTaskId(s: unknown): s is string {
  return typeof s === "string" && TASK_ID.test(s);
}

/** Throw BAD_TASK_ID unless `s` is a task id; use before a task id touches a path. */
export function assertTaskId(s: unknown): string {
  if (!isValidTaskId(s)) {
    const shown = typeof s === "string" ? JSON.stringify(s.slice(0, 40)) : typeof s;
    throw new DshError(
      "BAD_TASK_ID",
      `${shown} is not a task id; expected 12 chars like tmg3k2a1b2c3 (t + 11 of 0-9a-z). Copy it from \`dsh-herdr list\`.`,
    );
  }
  return s;
}

const MODEL_SLUG_MAX = 12;

/** The model's last path segment as a short slug: `xai/grok-4.7` → `grok-4-7`, keeping trailing words when long. */
export function modelSlug(model: string): string {
  const last =
    model
      .split("/")
      .filter((p) => p.trim() !== "")
      .pop() ?? "";
  const slug = last
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  if (slug === "") return "model";
  if (slug.length <= MODEL_SLUG_MAX) return slug;
  // Keep the most specific (trailing) words: deepseek-v4-1-flash → v4-1-flash.
  const words = slug.split("-");
  let out = words.pop()!.slice(0, MODEL_SLUG_MAX);
  while (words.length > 0 && out.length + 1 + words[words.length - 1]!.length <= MODEL_SLUG_MAX) {
    out = words.pop()! + "-" + out;
  }
  return out;
}

/** `<role>-<model slug>-<last 4 of task id>`, e.g. worker-flash-a1b2, review-grok4-7-a1b2 (the original naming). */
export function agentName(role: Role, model: string, taskId: string): string {
  const prefix = role === "reviewer" ? "review" : "worker";
  return `${prefix}-${modelSlug(model)}-${taskId.slice(-4)}`;
}
