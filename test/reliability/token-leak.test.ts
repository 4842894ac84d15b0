// A child's task token is a secret: whatever fails, it is in no error message, record, log line or reply. Each
// failure path below runs on a real daemon process; then every file of the task dir (task.json holds the token by
// design, in its `token` field only), daemon.log and the task.get reply are searched for it.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import type { AgentResult } from "../../src/core/types.js";
import { privateTmux, type PrivateTmux } from "../helpers/tmux.js";
import { cliClient, makeRepo, startDaemonProc, startShared, until, type Shared } from "./proc-harness.js";

const SCRIPT: Script = { conversations: [{ name: "never", match: "MARK-NEVER", steps: [{ text: "never" }] }] };

let shared: Shared;
const tmux: PrivateTmux = privateTmux("dsh-token");
before(async () => {
  shared = await startShared(SCRIPT, "dsh-token-");
});
after(async () => {
  await tmux.kill();
  await shared?.close();
});

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    const st = statSync(p);
    return st.isDirectory() ? filesUnder(p) : st.isFile() ? [p] : [];
  });
}

/** Runs one failing task on its own daemon; returns its settled result after checking no trace of its token. */
async function failAndSearch(
  name: string,
  opts: { env?: Record<string, string>; childEnv?: Record<string, string>; config?: object },
): Promise<AgentResult> {
  const dir = join(shared.dir, name);
  const repo = makeRepo(dir);
  const home = join(dir, "home");
  const d = await startDaemonProc(home, { ...shared.childEnv, ...(opts.childEnv ?? {}) }, opts);
  const cli = await cliClient(home);
  try {
    const { taskId } = await cli.request("task.spawn", {
      model: shared.modelName,
      cwd: repo,
      prompt: "MARK-NEVER",
      runtime: "tmux",
      isolated: true,
    });
    const r = await until(
      "the task failed",
      async () => {
        const x = await cli.request("task.get", { taskId });
        return x.status === "failed" ? x : undefined;
      },
      60_000,
      200,
    );
    const tdir = join(home, "tasks", taskId);
    const token = (JSON.parse(readFileSync(join(tdir, "task.json"), "utf8")) as { token: string }).token;
    assert.match(token, /^\S{16,}$/, "the task has a token to leak");
    const clean = (what: string, text: string) => assert.ok(!text.includes(token), `${what} carries the task token`);
    clean("task.get", JSON.stringify(await cli.request("task.get", { taskId })));
    clean("task.list", JSON.stringify(await cli.request("task.list", {})));
    for (const f of filesUnder(tdir)) {
      const text = readFileSync(f, "latin1");
      if (f.endsWith("/task.json")) {
        const rec = JSON.parse(text) as Record<string, unknown>;
        delete rec.token;
        clean(f, JSON.stringify(rec));
      } else clean(f, text);
    }
    clean("daemon.log", readFileSync(join(home, "daemon.log"), "utf8"));
    return r;
  } finally {
    cli.close();
    d.proc.kill("SIGTERM");
    await d.exited;
    await tmux.kill();
  }
}

test("--runtime tmux with no tmux on PATH: the failure names tmux, and the token is nowhere", async () => {
  // A PATH with git only: the daemon finds no tmux (its pi is found by path: DSH_HERDR_PI_BIN or node_modules).
  const bin = join(shared.dir, "git-only-bin");
  mkdirSync(bin, { recursive: true });
  symlinkSync("/usr/bin/git", join(bin, "git"));
  const r = await failAndSearch("no-tmux", { env: { PATH: bin }, config: { tmuxSocket: tmux.socketName } });
  assert.match(r.error?.message ?? "", /tmux could not run/, JSON.stringify(r.error));
});

test("a stalled child whose last output shows its token: the AGENT_STALLED message quotes the output, not the token", async () => {
  // A pi that answers --version, prints its environment's token (as a crash dump might) and exits before any hello.
  const loud = join(shared.dir, "loud-pi");
  writeFileSync(
    loud,
    '#!/bin/sh\nif [ "$1" = --version ]; then echo 0.73.1; exit 0; fi\necho "env: DSH_HERDR_TASK_TOKEN=$DSH_HERDR_TASK_TOKEN"\necho "raw: $DSH_HERDR_TASK_TOKEN"\nexit 1\n',
  );
  chmodSync(loud, 0o755);
  const r = await failAndSearch("stalled", {
    childEnv: { DSH_HERDR_PI_BIN: loud },
    config: { tmuxSocket: tmux.socketName, readinessTimeoutMs: 1500 },
  });
  assert.equal(r.error?.code, "AGENT_STALLED", JSON.stringify(r.error));
  assert.match(r.error?.message ?? "", /last output: .*raw: /s, "the output is still quoted");
});
