// `close` (and an abort of a settled task) ends the child on every runtime within seconds, whether or not its pane
// is kept: checked by the pi process being gone (/proc; a zombie nobody reaps counts as gone), not by a signal sent.
// Real pi on headless, a private tmux server, and the fake Herdr (which runs its agents in real tmux panes).
import { after, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import type { Config } from "../../src/store/config.js";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import { privateTmux } from "../helpers/tmux.js";
import { until } from "../helpers/wait.js";
import { SCRIPT, startHarness, type Harness } from "./daemon-harness.js";
import { checkChildren, childProcessesByTask } from "../../src/cli/doctor/children.js";

/**
 * Live (not zombie) processes started for a task: pi renames itself ("pi") so its argv says nothing, but its
 * environment names the task. tmux servers are left out (the one the daemon started holds no task's env anyway).
 */
function liveOfTask(taskId: string): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const env = readFileSync(`/proc/${name}/environ`, "utf8");
      const state = readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]?.[0];
      const cmd = readFileSync(`/proc/${name}/cmdline`, "utf8");
      if (
        env.includes(`DSH_HERDR_TASK_ID=${taskId}\0`) &&
        state !== "Z" &&
        !/(^|\/)tmux/.test(cmd.split("\0")[0] ?? "")
      )
        out.push(Number(name));
    } catch {
      /* ended meanwhile, or not ours to read */
    }
  }
  return out;
}

const tmux = privateTmux("dsh-close");
let fake: FakeHerdr | undefined;
after(async () => {
  await tmux.kill();
  await fake?.close();
});

const RUNTIMES: { name: string; config: () => Promise<Partial<Config>> }[] = [
  { name: "headless", config: async () => ({ runtime: "headless" }) },
  { name: "tmux", config: async () => ({ runtime: "tmux", tmuxSocket: tmux.socketName }) },
  {
    name: "herdr",
    config: async () => {
      fake = await startFakeHerdr({ quietMs: 1000 });
      return { runtime: "herdr", herdrSocketPath: fake.socketPath };
    },
  },
];

for (const rt of RUNTIMES)
  describe(`${rt.name}`, () => {
    let h: Harness;
    after(async () => {
      await h?.close();
    });

    async function settledChild(): Promise<string> {
      h ??= await startHarness(SCRIPT, await rt.config());
      const { taskId } = await h.spawn({ prompt: "MARK-WORKER close me", isolated: true });
      const r = await h.wait(taskId);
      assert.equal(r.status, "completed", JSON.stringify(r));
      // The settled child idles (it may get a follow-up): it is there to end.
      assert.ok(liveOfTask(taskId).length > 0, `the settled ${rt.name} child runs before the close`);
      return taskId;
    }

    test(`${rt.name}: close (the pane kept) ends the child within seconds`, async () => {
      const taskId = await settledChild();
      // doctor counts the task's live processes (pi's, and a headless wrapper's).
      assert.ok((childProcessesByTask(h.home).get(taskId) ?? []).length > 0, "doctor counts the settled child");
      assert.equal(checkChildren(h.home).level, "ok");
      const closed = await h.cli.request("task.close", { taskId, closePane: false });
      assert.equal(closed.status, "closed");
      await until(`the ${rt.name} child gone after close`, () => liveOfTask(taskId).length === 0, 8000, 100);
      assert.equal(childProcessesByTask(h.home).get(taskId), undefined, "doctor counts none after the close");
    });

    test(`${rt.name}: an abort of a settled task ends the child within seconds`, async () => {
      const taskId = await settledChild();
      await h.cli.request("task.abort", { taskIds: [taskId] });
      await until(`the ${rt.name} child gone after abort`, () => liveOfTask(taskId).length === 0, 8000, 100);
    });
  });
