import { after } from "node:test";
import { defineLifecycleScenarios } from "./lifecycle-scenarios.js";
import { privateTmux } from "../helpers/tmux.js";

// A private tmux server (-L): never the user's. Killed after the scenarios' own clean-up.
const tmux = privateTmux("dsh-life");
defineLifecycleScenarios({ runtime: "tmux", tmuxSocket: tmux.socketName });
after(async () => {
  await tmux.kill();
});
