// The fake Herdr's detection pass (fixtures/fake-herdr/core.ts tick) against a pane made while it lists tmux's
// panes: a listing taken before the pane existed must not make the fake forget it (the pane, and the agent started
// in it, vanished from agent.list for good: CI, e2e/daemon-herdr "task.list --external", 5cf673f).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { FakeCore } from "../../fixtures/fake-herdr/core.js";

const dir = mkdtempSync(join(tmpdir(), "dsh-fake-herdr-tick-"));
const core = new FakeCore();
after(async () => {
  await core.tmux.kill();
  rmSync(dir, { recursive: true, force: true });
});

test("a pane made while a detection pass lists tmux's panes is not forgotten by that pass", async () => {
  await core.tmux.start();
  // The pass's listing is taken, then held until the new pane is in the model (as a slow tmux or a loaded CPU
  // orders them).
  const listing = core.tmux.panes();
  let created!: () => void;
  const paneMade = new Promise<void>((r) => (created = r));
  const original = core.tmux.panes.bind(core.tmux);
  core.tmux.panes = async () => {
    const stale = await listing;
    await paneMade;
    core.tmux.panes = original;
    return stale;
  };
  const pass = core.tick();
  const made = (await core.dispatch("workspace.create", { cwd: dir, label: "race" })) as {
    root_pane: { pane_id: string };
  };
  created();
  await pass;
  const id = made.root_pane.pane_id;
  assert.ok(core.model.panes.has(id), `pane ${id} forgotten by a listing older than it`);
  // The next pass, with a listing that has it, keeps it too.
  await core.tick();
  assert.ok(core.model.panes.has(id));
});
