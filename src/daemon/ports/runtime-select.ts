// Which runtime a task runs in, and building one. Auto: herdr when a Herdr server answers ping, else tmux when
// installed, else headless. An explicit choice (--runtime, then config) wins, and fails clearly when unusable.
import { execa } from "execa";
import { DshError } from "../../core/errors.js";
import type { RuntimeKind } from "../../core/types.js";
import { createHeadlessRuntime, type HeadlessRuntimeOptions } from "../../runtime/headless/runtime.js";
import { createHerdrRuntime, type HerdrRuntimeOptions } from "../../runtime/herdr/index.js";
import { createTmuxRuntime, type TmuxRuntimeOptions } from "../../runtime/tmux/runtime.js";
import type { Runtime } from "../../runtime/types.js";

export type RuntimeChoice = "auto" | RuntimeKind;
export const RUNTIME_KINDS: readonly RuntimeKind[] = ["herdr", "tmux", "headless"];

/** A ping answer: a boolean, or herdrPing()'s outcome (its reason ends up in the log sentence). */
export type PingAnswer = boolean | { ok: boolean; reason?: string };

export interface SelectRuntimeInput {
  /** --runtime from the CLI or the spawn request; "auto" or absent defers to config. */
  explicit?: RuntimeChoice | string;
  /** The daemon config (only `runtime` is read); structurally compatible with the store's Config. */
  config: { runtime?: RuntimeChoice | string };
  herdrPing: () => Promise<PingAnswer>;
  /** Default: `tmux -V` runs. */
  tmuxAvailable?: () => Promise<boolean>;
}

export interface RuntimeSelection {
  kind: RuntimeKind;
  /** One sentence for the daemon log. */
  reason: string;
}

export async function tmuxInstalled(bin = "tmux"): Promise<boolean> {
  const r = await execa(bin, ["-V"], { reject: false, stdin: "ignore", timeout: 5000 }).catch(() => null);
  return r?.exitCode === 0;
}

function parseChoice(value: string | undefined, where: string): RuntimeChoice | undefined {
  if (value === undefined || value === "") return undefined;
  if (value === "auto" || (RUNTIME_KINDS as readonly string[]).includes(value)) return value as RuntimeChoice;
  throw new DshError(
    "BAD_PARAMS",
    `${where} runtime ${JSON.stringify(value)} is unknown: use auto, herdr, tmux or headless`,
  );
}

async function ping(fn: () => Promise<PingAnswer>): Promise<{ ok: boolean; reason?: string }> {
  try {
    const a = await fn();
    return typeof a === "boolean" ? { ok: a } : a;
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
}

export async function selectRuntime(input: SelectRuntimeInput): Promise<RuntimeSelection> {
  const explicit = parseChoice(input.explicit, "the requested");
  const configured = parseChoice(input.config.runtime, "the config");
  const tmuxOk = input.tmuxAvailable ?? (() => tmuxInstalled());
  const forced =
    explicit && explicit !== "auto"
      ? { kind: explicit, by: "requested" }
      : configured && configured !== "auto"
        ? { kind: configured, by: "configured" }
        : null;

  if (forced) {
    const how = forced.by === "requested" ? "--runtime" : "config runtime";
    if (forced.kind === "herdr") {
      const p = await ping(input.herdrPing);
      if (!p.ok)
        throw new DshError(
          "RUNTIME_UNAVAILABLE",
          `${how} herdr, but no Herdr server answered ping${p.reason ? ` (${p.reason})` : ""}: start Herdr, or choose tmux or headless`,
        );
    } else if (forced.kind === "tmux" && !(await tmuxOk())) {
      throw new DshError(
        "RUNTIME_UNAVAILABLE",
        `${how} tmux, but tmux is not installed or does not run: install tmux 3.x, or choose headless`,
      );
    }
    return { kind: forced.kind, reason: `runtime ${forced.kind}: ${forced.by} explicitly (${how})` };
  }
  const p = await ping(input.herdrPing);
  if (p.ok) return { kind: "herdr", reason: "runtime herdr: a Herdr server answered ping" };
  const noHerdr = `no Herdr server answered ping${p.reason ? ` (${p.reason})` : ""}`;
  if (await tmuxOk()) return { kind: "tmux", reason: `runtime tmux: ${noHerdr} and tmux is installed` };
  return { kind: "headless", reason: `runtime headless: ${noHerdr} and tmux is not installed` };
}

export interface RuntimeOptions {
  /** socketName: config tmuxSocket (default "dsh-herdr"). */
  tmux?: TmuxRuntimeOptions;
  headless?: HeadlessRuntimeOptions;
  herdr?: HerdrRuntimeOptions;
}

export type RuntimeFactory = (opts: RuntimeOptions) => Runtime;

/** The built-in factories; pass `factories` to createRuntime to replace one (tests, other Herdr transports). */
export const RUNTIME_FACTORIES: Readonly<Record<RuntimeKind, RuntimeFactory>> = {
  herdr: (o) => createHerdrRuntime(o.herdr ?? {}),
  tmux: (o) => createTmuxRuntime(o.tmux ?? { socketName: "dsh-herdr" }),
  headless: (o) => createHeadlessRuntime(o.headless ?? {}),
};

export function createRuntime(
  kind: RuntimeKind,
  opts: RuntimeOptions = {},
  factories: Partial<Record<RuntimeKind, RuntimeFactory>> = {},
): Runtime {
  const make = factories[kind] ?? RUNTIME_FACTORIES[kind];
  if (!make)
    throw new DshError("RUNTIME_UNAVAILABLE", `unknown runtime ${JSON.stringify(kind)}: use herdr, tmux or headless`);
  return make(opts);
}
