// The Herdr runtime: a child is a program in its own Herdr pane (shared/design.md §8). It is started by typing
// `exec <starter>` into the pane's shell (starter.ts), not by Herdr's `agent.start`: the user's shell would pick the
// `pi` that runs, and Herdr's pi detection is known to leave an agent.start'ed pi launch_pending (agent_not_ready)
// or a busy one reading idle. Liveness and exit come from our own evidence (the starter's pid and exit files, Herdr's
// pane_exited); Herdr's agent status is passed on as its raw word and decides nothing here. A pane on another machine
// (`machine`) cannot get our starter: there Herdr's `agent.start` is the only way in.
import { basename, dirname, isAbsolute } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { DshError } from "../../core/errors.js";
import { checkLaunchSpec } from "../launch-check.js";
import type { HerdrStatus } from "../../core/types.js";
import type { ChildExit, LaunchSpec, Runtime, RuntimeEvent, RuntimeHandle } from "../types.js";
import { HerdrClient, createTransport, type HerdrClientOptions } from "./client.js";
import { herdrCodeOf, isGone } from "./errors.js";
import { herdrKey } from "./keys.js";
import { readStarterExit, readStarterPid, starterAlive, starterPaths, writeStarter } from "./starter.js";
import { openPane } from "./topology.js";
import { watchPane, type Probe } from "./watch.js";

export { herdrKey };

export interface HerdrRuntimeOptions extends HerdrClientOptions {
  /** Herdr agent kind (default "pi"); argv[0] must be that kind's executable. */
  kind?: string;
  /**
   * How long the pane's shell may take to run the typed start line (the starter records its pid), and agent.start's
   * own readiness timeout on a machine (Herdr: >3000, ≤300000; default 30000).
   */
  startTimeoutMs?: number;
  /** Retries of agent.start while the fresh pane's shell is still starting (agent_pane_busy); machines only. */
  busyRetries?: number;
  busyBackoffMs?: number;
  /** How often a watched pane's state is also read, to catch a mute subscription (default 5 s). */
  watchCheckMs?: number;
}

const AGENT_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

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

  /** Herdr's raw word for the pane's agent (pane.get's agent_status), undefined when the pane is gone. */
  const herdrWord = async (paneId: string): Promise<HerdrStatus | undefined> => {
    try {
      const r = await client.call("pane.get", { pane_id: paneId });
      const status = (r.pane as { agent_status?: unknown } | undefined)?.agent_status;
      return typeof status === "string" ? (status as HerdrStatus) : "unknown";
    } catch (e) {
      if (isGone(e)) return undefined;
      throw e;
    }
  };

  const probe = async (h: RuntimeHandle): Promise<Probe> => {
    const paneId = pane(h);
    if (started(h)) {
      // Our evidence decides whether the child lives; Herdr's word is only reported.
      const word = await herdrWord(paneId);
      if (word === undefined) return { paneExists: false, state: "missing" };
      const alive = await starterAlive(h.pid, starterPaths(dirname(h.exitPath)).script);
      return { paneExists: true, state: alive ? word : "missing" };
    }
    // A child started by agent.start (a machine's, or one journaled by an older daemon): Herdr's agent is all we have.
    try {
      const r = await client.call("agent.get", { target: paneId });
      const status = (r.agent as { agent_status?: unknown } | undefined)?.agent_status;
      return { paneExists: true, state: typeof status === "string" ? (status as HerdrStatus) : "unknown" };
    } catch (e) {
      if (!isGone(e)) throw e;
    }
    return (await herdrWord(paneId)) === undefined
      ? { paneExists: false, state: "missing" }
      : { paneExists: true, state: "missing" };
  };

  const exitOf = async (h: RuntimeHandle): Promise<ChildExit> => {
    const code = started(h) ? await readStarterExit(h.exitPath) : undefined;
    return { code: code ?? null };
  };

  /** Types the start line into the pane's shell and waits for the starter's pid: the shell ran our line. */
  const startInShell = async (spec: LaunchSpec, handle: RuntimeHandle): Promise<void> => {
    const paneId = handle.paneId as string;
    const { paths, line } = await writeStarter(spec, spec.env.PATH ?? process.env.PATH ?? "/usr/bin:/bin");
    // The label lets a restarted daemon find the pane again (find) without Herdr's agent detection.
    await client.call("pane.rename", { pane_id: paneId, label: spec.name });
    await client.call("pane.send_input", { pane_id: paneId, text: line, keys: ["enter"] });
    const deadline = Date.now() + startTimeoutMs;
    for (;;) {
      const pid = await readStarterPid(paths.pidPath);
      if (pid !== undefined) {
        handle.pid = pid;
        handle.exitPath = paths.exitPath;
        return;
      }
      if (Date.now() >= deadline) break;
      await sleep(50);
    }
    const word = await herdrWord(paneId).catch((e: unknown) => `(unreadable: ${String(e)})`);
    const screen = await client
      .call("pane.read", { pane_id: paneId, source: "recent", lines: 5, format: "text", strip_ansi: true })
      .then((r) => String((r.read as { text?: unknown } | undefined)?.text ?? "").trim())
      .catch(() => "");
    throw new DshError(
      "LAUNCH_FAILED",
      `the shell in Herdr pane ${paneId} did not run the start line within ${startTimeoutMs} ms (Herdr reads the pane as ${word ?? "closed"}${screen ? `; its screen ends: ${screen.slice(-200)}` : ""}). Fix: check the user's shell start-up files, or use --runtime tmux`,
      { paneId },
    );
  };

  /** Herdr's own agent.start, retried while the fresh pane's shell starts (a machine's pane). */
  const startByHerdr = async (spec: LaunchSpec, handle: RuntimeHandle): Promise<void> => {
    const retries = opts.busyRetries ?? 20;
    for (let attempt = 0; ; attempt++) {
      try {
        await client.call(
          "agent.start",
          { name: spec.name, kind, pane_id: handle.paneId, args: spec.argv.slice(1), timeout_ms: startTimeoutMs },
          { timeoutMs: startTimeoutMs + 5_000 },
        );
        return;
      } catch (e) {
        if (herdrCodeOf(e) !== "agent_pane_busy" || attempt >= retries) throw e;
        await sleep(Math.min(1_000, (opts.busyBackoffMs ?? 100) * 1.5 ** attempt));
      }
    }
  };

  return {
    kind: "herdr",

    async launch(spec: LaunchSpec): Promise<RuntimeHandle> {
      // A remote machine's cwd cannot be checked here; a local one is, like every runtime's.
      if (spec.machine === undefined) await checkLaunchSpec(spec);
      checkSpec(spec, kind);
      // agent.start types a bare `pi` (a machine's pane): PATH in the pane's env points at argv[0]'s directory, which
      // the remote user's shell start-up files may still override; our own start needs no such hint.
      const env = { ...spec.env };
      const program = spec.argv[0] as string;
      if (spec.machine !== undefined && isAbsolute(program))
        env.PATH = `${dirname(program)}:${spec.env.PATH ?? process.env.PATH ?? "/usr/bin:/bin"}`;
      const place = await openPane(client, spec, env);
      const handle: RuntimeHandle = {
        runtime: "herdr",
        paneId: place.paneId,
        tabId: place.tabId,
        workspaceId: place.workspaceId,
        agentName: spec.name,
      };
      if (spec.machine !== undefined) handle.machine = spec.machine;
      try {
        if (spec.machine === undefined) await startInShell(spec, handle);
        else await startByHerdr(spec, handle);
        return handle;
      } catch (e) {
        await client.call("pane.close", { pane_id: place.paneId }).catch(() => undefined);
        throw e;
      }
    },

    // The pane a launch left behind: labelled with the agent's name, in the task's workdir, its starter alive (a
    // machine's: Herdr's agent of that name).
    async find(where) {
      if (opts.machine !== undefined) return findAgent(where);
      const r = await client.call("pane.list", {});
      const panes = (Array.isArray(r.panes) ? r.panes : []) as {
        label?: unknown;
        cwd?: unknown;
        pane_id?: unknown;
        tab_id?: unknown;
        workspace_id?: unknown;
      }[];
      const paths = starterPaths(where.taskDir);
      const pid = await readStarterPid(paths.pidPath);
      if (pid === undefined) return undefined;
      for (const p of panes) {
        if (p.label !== where.name || typeof p.pane_id !== "string") continue;
        if (where.cwd !== undefined && typeof p.cwd === "string" && p.cwd !== where.cwd) continue;
        const handle: RuntimeHandle = {
          runtime: "herdr",
          paneId: p.pane_id,
          agentName: where.name,
          pid,
          exitPath: paths.exitPath,
        };
        if (typeof p.tab_id === "string") handle.tabId = p.tab_id;
        if (typeof p.workspace_id === "string") handle.workspaceId = p.workspace_id;
        if ((await probe(handle)).state !== "missing") return handle;
      }
      return undefined;
    },

    async isAlive(h) {
      return (await probe(h)).state !== "missing";
    },

    // The starter's record of the child's exit code; Herdr itself reports none.
    async exitStatus(h): Promise<ChildExit | null> {
      const exit = await exitOf(h);
      return exit.code === null ? null : exit;
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
      await client.call("pane.send_input", { pane_id: pane(h), text, keys: ["enter"] });
    },

    async sendKeys(h, keys) {
      const combos = keys.map(herdrKey); // refused by name before anything is sent
      await client.call("pane.send_keys", { pane_id: pane(h), keys: combos });
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
          exit: exitOf,
          ownEvidence: started(h),
          ...(opts.watchCheckMs !== undefined ? { checkMs: opts.watchCheckMs } : {}),
        },
        h,
        onEvent,
      );
    },
  };

  async function findAgent(where: { name: string; cwd?: string }): Promise<RuntimeHandle | undefined> {
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
  }
}

/** A handle whose child our starter runs: its pid and exit file are the evidence. */
function started(h: RuntimeHandle): h is RuntimeHandle & { pid: number; exitPath: string } {
  return typeof h.pid === "number" && typeof h.exitPath === "string";
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
      `The Herdr runtime starts ${kind} agents only, so argv[0] must be the ${kind} executable, not "${program ?? ""}". Fix: launch ${kind} (or use the tmux/headless runtime for other commands)`,
    );
  }
  if (spec.machine === undefined && !spec.argv[0]?.startsWith("/")) {
    throw new DshError(
      "LAUNCH_FAILED",
      `The Herdr runtime needs ${kind}'s absolute path ("${program}"): a bare name would be resolved by the pane's shell. Fix: pass the full path`,
    );
  }
  // Herdr refuses any control character in an agent argument (char::is_control): refused here by name, for every
  // start path alike.
  spec.argv.forEach((arg, i) => {
    const ch = /\p{Cc}/u.exec(arg)?.[0];
    if (ch === undefined) return;
    throw new DshError(
      "BAD_PARAMS",
      `argument ${i} (${JSON.stringify(arg.slice(0, 40))}) has a control character, ${controlName(ch)}, which Herdr cannot pass to an agent. Fix: remove it, or write long text to a file and pass its path`,
      { argIndex: i, char: `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}` },
    );
  });
}

const CONTROL_NAMES: Record<string, string> = {
  "\t": "a tab",
  "\n": "a newline",
  "\r": "a carriage return",
  "\0": "a NUL",
  "\x1b": "an escape (ESC)",
  "\x7f": "a delete (DEL)",
};

function controlName(ch: string): string {
  const code = `U+${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0")}`;
  const name = CONTROL_NAMES[ch];
  return name ? `${name} (${code})` : code;
}
