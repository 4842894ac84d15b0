// The Herdr runtime: a child is a Herdr agent (`agent start --kind pi`) in its own pane (shared/design.md §8).
import { basename, dirname, isAbsolute } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DshError } from "../../core/errors.js";
import { checkLaunchSpec } from "../launch-check.js";
import type { HerdrStatus } from "../../core/types.js";
import type { ChildExit, LaunchSpec, Runtime, RuntimeEvent, RuntimeHandle } from "../types.js";
import { HerdrClient, createTransport, type HerdrClientOptions } from "./client.js";
import { herdrCodeOf, isGone } from "./errors.js";
import { openPane } from "./topology.js";
import { watchPane, type Probe } from "./watch.js";

export interface HerdrRuntimeOptions extends HerdrClientOptions {
  /** Herdr agent kind (default "pi"); argv[0] must be that kind's executable. */
  kind?: string;
  /** agent.start's own readiness timeout (Herdr: >3000, ≤300000; default 30000). */
  startTimeoutMs?: number;
  /** Retries of agent.start while the fresh pane's shell is still starting (agent_pane_busy). */
  busyRetries?: number;
  busyBackoffMs?: number;
}

const AGENT_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
const KEY_NAMES: Record<string, string> = {
  Enter: "enter",
  Escape: "esc",
  Tab: "tab",
  BSpace: "backspace",
  Backspace: "backspace",
  Up: "up",
  Down: "down",
  Left: "left",
  Right: "right",
  Space: "space",
};

export function createHerdrRuntime(opts: HerdrRuntimeOptions = {}): Runtime {
  const transport = createTransport(opts);
  const client = new HerdrClient(transport);
  const kind = opts.kind ?? "pi";
  const startTimeoutMs = opts.startTimeoutMs ?? 30_000;

  const pane = (h: RuntimeHandle): string => {
    if (h.runtime !== "herdr" || typeof h.paneId !== "string") {
      throw new DshError(
        "BAD_PARAMS",
        `Not a Herdr handle (runtime ${h.runtime}, pane ${String(h.paneId)}). Fix: pass the handle launch() returned`,
      );
    }
    return h.paneId;
  };

  const probe = async (h: RuntimeHandle): Promise<Probe> => {
    const paneId = pane(h);
    try {
      const r = await client.call("agent.get", { target: paneId });
      const status = (r.agent as { agent_status?: unknown } | undefined)?.agent_status;
      return { paneExists: true, state: typeof status === "string" ? (status as HerdrStatus) : "unknown" };
    } catch (e) {
      if (!isGone(e)) throw e;
    }
    try {
      await client.call("pane.get", { pane_id: paneId });
      return { paneExists: true, state: "missing" };
    } catch (e) {
      if (isGone(e)) return { paneExists: false, state: "missing" };
      throw e;
    }
  };

  return {
    kind: "herdr",

    async launch(spec: LaunchSpec): Promise<RuntimeHandle> {
      const [program, ...args] = spec.argv;
      // A remote machine's cwd cannot be checked here; a local one is, like every runtime's.
      if (spec.machine === undefined) await checkLaunchSpec(spec);
      checkSpec(spec, kind);
      // agent.start runs the kind's own command; point PATH at argv[0]'s directory so it is the one found.
      const env = { ...spec.env };
      if (program !== undefined && isAbsolute(program)) {
        env.PATH = `${dirname(program)}:${spec.env.PATH ?? process.env.PATH ?? "/usr/bin:/bin"}`;
      }
      const place = await openPane(client, spec, env);
      const handle: RuntimeHandle = {
        runtime: "herdr",
        paneId: place.paneId,
        tabId: place.tabId,
        workspaceId: place.workspaceId,
        agentName: spec.name,
      };
      if (spec.machine !== undefined) handle.machine = spec.machine;
      const retries = opts.busyRetries ?? 20;
      for (let attempt = 0; ; attempt++) {
        try {
          await client.call(
            "agent.start",
            { name: spec.name, kind, pane_id: place.paneId, args, timeout_ms: startTimeoutMs },
            { timeoutMs: startTimeoutMs + 5_000 },
          );
          return handle;
        } catch (e) {
          if (herdrCodeOf(e) !== "agent_pane_busy" || attempt >= retries) {
            await client.call("pane.close", { pane_id: place.paneId }).catch(() => undefined);
            throw e;
          }
          await sleep(Math.min(1_000, (opts.busyBackoffMs ?? 100) * 1.5 ** attempt));
        }
      }
    },

    // Herdr knows its agents by name: the one this launch started (same name, started in the task's workdir, a
    // live agent) is the task's child. The name carries the role, model and the task id's last four characters.
    async find(where) {
      const r = await client.call("agent.list", {});
      const agents = (Array.isArray(r.agents) ? r.agents : []) as {
        name?: unknown;
        cwd?: unknown;
        pane_id?: unknown;
        tab_id?: unknown;
        workspace_id?: unknown;
      }[];
      for (const a of agents) {
        if (a.name !== where.name || typeof a.pane_id !== "string") continue;
        if (where.cwd !== undefined && typeof a.cwd === "string" && a.cwd !== where.cwd) continue;
        const handle: RuntimeHandle = { runtime: "herdr", paneId: a.pane_id, agentName: where.name };
        if (typeof a.tab_id === "string") handle.tabId = a.tab_id;
        if (typeof a.workspace_id === "string") handle.workspaceId = a.workspace_id;
        if (opts.machine !== undefined) handle.machine = opts.machine;
        if ((await probe(handle)).state !== "missing") return handle;
      }
      return undefined;
    },

    async isAlive(h) {
      return (await probe(h)).state !== "missing";
    },

    // Herdr reports no exit codes.
    async exitStatus(): Promise<ChildExit | null> {
      return null;
    },

    async readOutput(h, o = {}) {
      const r = await client.call("pane.read", {
        pane_id: pane(h),
        source: "recent",
        lines: o.lines ?? 80,
        format: "text",
        strip_ansi: true,
      });
      const text = (r.read as { text?: unknown } | undefined)?.text;
      return typeof text === "string" ? text : "";
    },

    async sendText(h, text) {
      await client.call("pane.send_input", { pane_id: pane(h), text, keys: ["Enter"] });
    },

    async sendKeys(h, keys) {
      await client.call("pane.send_keys", { pane_id: pane(h), keys: keys.map(herdrKey) });
    },

    async close(h) {
      try {
        await client.call("pane.close", { pane_id: pane(h) });
      } catch (e) {
        if (!isGone(e)) throw e;
      }
    },

    async agentState(h) {
      return (await probe(h)).state;
    },

    watch(h: RuntimeHandle, onEvent: (e: RuntimeEvent) => void): () => void {
      pane(h);
      return watchPane(
        {
          transport,
          probe: async (x) => {
            await client.server();
            return probe(x);
          },
        },
        h,
        onEvent,
      );
    },
  };
}

function checkSpec(spec: LaunchSpec, kind: string): void {
  if (!AGENT_NAME.test(spec.name)) {
    throw new DshError(
      "BAD_PARAMS",
      `Herdr agent name "${spec.name}" is invalid: use [a-z][a-z0-9_-], at most 32 characters`,
    );
  }
  const program = spec.argv[0];
  if (program === undefined || basename(program) !== kind) {
    throw new DshError(
      "LAUNCH_FAILED",
      `The Herdr runtime starts agents with agent start --kind ${kind}, so argv[0] must be the ${kind} executable, not "${program ?? ""}". Fix: launch ${kind} (or use the tmux/headless runtime for other commands)`,
    );
  }
  const bad = spec.argv.find((a) => /[\n\r\0]/.test(a));
  if (bad !== undefined) {
    throw new DshError(
      "BAD_PARAMS",
      `Herdr cannot pass an agent argument with a newline or NUL (${JSON.stringify(bad.slice(0, 40))}). Fix: write long text to a file and pass its path`,
    );
  }
}

/** tmux-style names (Escape, C-c) to Herdr key combos (esc, ctrl+c). */
export function herdrKey(key: string): string {
  const mapped = KEY_NAMES[key];
  if (mapped) return mapped;
  const ctrl = /^C-(.)$/i.exec(key);
  if (ctrl) return `ctrl+${(ctrl[1] as string).toLowerCase()}`;
  const meta = /^M-(.)$/i.exec(key);
  if (meta) return `alt+${(meta[1] as string).toLowerCase()}`;
  return key.length === 1 ? key : key.toLowerCase();
}
