// Reliability harness: one scripted model and pi agent dir shared by every case, a git repo, and daemons run as
// real processes (daemon-proc.ts) that a test can SIGKILL and start again on the same home.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startScriptedModel, type ScriptedModel } from "../../fixtures/scripted-model/server.js";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { connect, type DaemonClient } from "../../src/client/index.js";
import { parseJournal, type JournalRecord } from "../../src/core/lifecycle/journal-record.js";
import { initRepo } from "../helpers/git.js";

export const DAEMON_PROC = join(import.meta.dirname, "daemon-proc.js");

export interface Shared {
  dir: string;
  model: ScriptedModel;
  modelName: string;
  childEnv: Record<string, string>;
  close(): Promise<void>;
}

export async function startShared(script: Script, prefix = "dsh-rel-"): Promise<Shared> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const model = await startScriptedModel({ script, logPath: join(dir, "requests.jsonl") });
  const agent = preparePiAgentDir(dir, model.url);
  return {
    dir,
    model,
    modelName: agent.model,
    childEnv: agent.env,
    async close() {
      await model.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function makeRepo(parent: string, name = "repo"): string {
  return initRepo(parent, name);
}

export interface DaemonProc {
  proc: ChildProcess;
  pid: number;
  /** Resolves with the exit signal (or code) when the process ends. */
  exited: Promise<string>;
  stderr(): string;
}

/** Start a daemon process on `home`; resolves once it serves the socket (or rejects with its stderr). */
export async function startDaemonProc(
  home: string,
  childEnv: Record<string, string>,
  opts: { env?: Record<string, string>; config?: object } = {},
): Promise<DaemonProc> {
  const proc = spawn(
    process.execPath,
    [DAEMON_PROC, home, JSON.stringify(childEnv), JSON.stringify(opts.config ?? {})],
    {
      env: { ...process.env, ...(opts.env ?? {}) },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let err = "";
  proc.stderr!.on("data", (d) => (err += d));
  const exited = new Promise<string>((resolve) => proc.on("exit", (code, sig) => resolve(sig ?? String(code))));
  await new Promise<void>((resolve, reject) => {
    let out = "";
    proc.stdout!.on("data", (d) => {
      out += d;
      if (out.includes("ready")) resolve();
    });
    void exited.then((how) => reject(new Error(`daemon exited (${how}) before ready: ${err}`)));
  });
  return { proc, pid: proc.pid!, exited, stderr: () => err };
}

/** A cli client that keeps no pending work alive (requests time out generously). */
export function cliClient(home: string): Promise<DaemonClient> {
  return connect(home, { kind: "cli", timeoutMs: 120_000 });
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export { sleep, until } from "../helpers/wait.js";

/** A raw socket speaking newline-delimited frames: write any bytes, read reply lines one by one. */
export interface RawConn {
  send(data: string | Buffer): void;
  next(timeoutMs?: number): Promise<any>;
  /** Replies received and not yet taken. */
  readonly queued: number;
  close(): void;
}

export async function rawConnect(socketPath: string): Promise<RawConn> {
  const { createConnection } = await import("node:net");
  const s = createConnection(socketPath);
  await new Promise<void>((resolve, reject) => {
    s.once("connect", resolve);
    s.once("error", reject);
  });
  s.on("error", () => undefined);
  const lines: string[] = [];
  const waiters: ((l: string) => void)[] = [];
  let buf = "";
  s.setEncoding("utf8");
  s.on("data", (d: string) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf("\n")) !== -1) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      const w = waiters.shift();
      if (w) w(line);
      else lines.push(line);
    }
  });
  return {
    send: (data) => void s.write(data),
    next(timeoutMs = 10_000) {
      const l = lines.shift();
      if (l !== undefined) return Promise.resolve(JSON.parse(l));
      return new Promise((resolve, reject) => {
        const t = setTimeout(() => reject(new Error("no reply in time")), timeoutMs);
        waiters.push((line) => {
          clearTimeout(t);
          resolve(JSON.parse(line));
        });
      });
    },
    get queued() {
      return lines.length;
    },
    close: () => s.destroy(),
  };
}

/**
 * Live processes whose command line contains `text` (Linux /proc; a task's pi child names its session file). tmux
 * processes are left out: the tmux server keeps the argv of the client that started it, a first child's included.
 */
export function processesMentioning(text: string, alsoText?: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8");
      const state = readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]?.[0];
      if (
        cmd.includes(text) &&
        (alsoText === undefined || cmd.includes(alsoText)) &&
        state !== "Z" &&
        !/(^|\/)tmux$/.test(cmd.split("\0")[0] ?? "")
      )
        pids.push(Number(name));
    } catch {
      /* ended meanwhile */
    }
  }
  return pids;
}

/**
 * Samples processesMentioning(text, alsoText) until stopped: every process that ran for a while shows up in `seen`.
 * `alsoText` narrows it to one kind of process (a pi child names its session file; the headless runtime's brief
 * `mkfifo <task dir>/stdin` names the task dir too and was once sampled as a second child).
 */
export function sampleProcesses(text: string, everyMs = 200, alsoText?: string): { seen: Set<number>; stop(): void } {
  const seen = new Set<number>();
  const take = () => processesMentioning(text, alsoText).forEach((p) => seen.add(p));
  take();
  const t = setInterval(take, everyMs);
  return { seen, stop: () => (take(), clearInterval(t)) };
}

/**
 * A task's events.jsonl as written so far, read as the daemon reads it (TaskStore.readJournal): each whole line
 * parsed, then kept only as a record of a known kind and shape (core/lifecycle/journal-record.ts), so a test
 * switches on the same union the daemon's writers, recovery and verify use. A torn last line is left out; [] before
 * the task dir has a journal.
 */
export function journal(home: string, taskId: string): JournalRecord[] {
  const p = join(home, "tasks", taskId, "events.jsonl");
  let text: string;
  try {
    text = readFileSync(p, "utf8");
  } catch {
    return [];
  }
  const lines = text
    .split("\n")
    .filter((l) => l.trim())
    .flatMap((l): unknown[] => {
      try {
        return [JSON.parse(l)];
      } catch {
        return [];
      }
    });
  return parseJournal(lines).records;
}
