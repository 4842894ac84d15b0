import { after, before } from "node:test";
import { execa } from "execa";
import { SCRIPT, startHarness, type Harness } from "./daemon-harness.js";
import { defineRuntimeScenarios } from "./scenarios.js";
import { privateTmux } from "../helpers/tmux.js";

// A private tmux server (-L): never the user's.
const tmux = privateTmux("dsh-e2e");
let h: Harness;
before(async () => {
  h = await startHarness(SCRIPT, { runtime: "tmux", tmuxSocket: tmux.socketName });
});
after(async () => {
  await h?.close();
  await tmux.kill();
});

defineRuntimeScenarios(
  () => h,
  "tmux",
  async (hh, taskId) => {
    // Kill the pane (and pi in it) under the daemon's feet.
    const pane = hh.daemon.supervisor.tasks.get(taskId)!.rec.handle!.tmuxPaneId!;
    await execa("tmux", ["-L", tmux.socketName, "kill-pane", "-t", pane]);
  },
);
