// The tmux runtime against real tmux on a private server: a plain program, bad input, kill -9, close.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTmuxRuntime } from "../../src/runtime/tmux/runtime.js";
import { isDshError } from "../../src/core/errors.js";
import type { RuntimeEvent, RuntimeHandle } from "../../src/runtime/types.js";
import { privateTmux, waitFor, type PrivateTmux } from "../helpers/tmux.js";

// Prints its env var and argv as one JSON line, then waits for one stdin line and exits 3.
const ECHO_CHILD = `
process.stdout.write("ARGS:" + JSON.stringify({ k: process.env.DSH_K, argv: process.argv.slice(1), cwd: process.cwd() }) + "\\n");
let buf = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => { buf += d; const i = buf.indexOf("\\n") >= 0 ? buf.indexOf("\\n") : buf.indexOf("\\r");
  if (i >= 0) { process.stdout.write("GOT:" + buf.slice(0, i) + "\\n"); setTimeout(() => process.exit(3), 100); } });
`;

let tmux: PrivateTmux;
let dir: string;
const rt = () => createTmuxRuntime({ socketName: tmux.socketName, configFile: "/dev/null", watchIntervalMs: 50 });

before(() => {
  tmux = privateTmux();
  dir = mkdtempSync(join(tmpdir(), "dsh-tmux-"));
});
after(async () => {
  await tmux.kill();
  rmSync(dir, { recursive: true, force: true });
});

function argsLine(screen: string): { k: string; argv: string[]; cwd: string } | undefined {
  const line = screen.split("\n").find((l) => l.startsWith("ARGS:"));
  return line ? JSON.parse(line.slice(5)) : undefined;
}

test("tmux: a plain program gets env and argv exactly, takes a line, exits, and closes", async () => {
  const runtime = rt();
  const marker = join(dir, "pwned");
  const envValue = "line1\nline2 #{pane_id} $(touch " + marker + ");";
  const args = [`$(touch ${marker}) ; "a b" 'c'`, ";", "semi;", "esc\\;", "#{pane_id}", "-n", ""];
  const h = await runtime.launch({
    taskId: "tplain000001",
    name: "worker-#{x}-a1",
    argv: [process.execPath, "-e", ECHO_CHILD, ...args],
    env: { DSH_K: envValue },
    cwd: dir,
    taskDir: dir,
  });
  assert.equal(h.runtime, "tmux");
  assert.match(h.tmuxPaneId ?? "", /^%\d+$/);
  assert.match(h.tmuxWindow ?? "", /^@\d+$/);
  assert.equal(h.tmuxSocket, tmux.socketName);
  assert.equal(await tmux.run(["display-message", "-p", "-t", h.tmuxWindow!, "#{window_name}"]), "worker-#{x}-a1");

  const seen = await waitFor("the ARGS line", async () => argsLine(await runtime.readOutput(h, { lines: 100 })));
  assert.deepEqual(seen, { k: envValue, argv: args, cwd: dir });
  assert.equal(existsSync(marker), false, "nothing may be interpreted by a shell");
  assert.equal(await runtime.isAlive(h), true);
  assert.equal(await runtime.exitStatus(h), null);
  assert.equal(await runtime.agentState!(h), "unknown");

  await runtime.sendText(h, "hello from the owner");
  await waitFor("the child to exit", async () => !(await runtime.isAlive(h)));
  assert.deepEqual(await runtime.exitStatus(h), { code: 3, signal: null });
  assert.match(await runtime.readOutput(h), /GOT:hello from the owner/);
  assert.equal(await runtime.agentState!(h), "missing");
  await assert.rejects(runtime.sendText(h, "late"), (e) => isDshError(e) && e.code === "PANE_GONE");

  await runtime.close(h);
  const panes = await tmux.run(["list-panes", "-a", "-F", "#{pane_id}"]).catch(() => "");
  assert.ok(!panes.split("\n").includes(h.tmuxPaneId!), "the window is closed");
  await runtime.close(h); // idempotent
  assert.equal(await runtime.isAlive(h), false);
  assert.equal(await runtime.exitStatus(h), null);
});

test("tmux: a missing cwd is refused before anything starts", async () => {
  const fresh = privateTmux("dsh-test-nocwd");
  const runtime = createTmuxRuntime({ socketName: fresh.socketName, configFile: "/dev/null" });
  await assert.rejects(
    runtime.launch({
      taskId: "tnocwd000001",
      name: "w",
      argv: ["true", "x"],
      env: {},
      cwd: join(dir, "nope"),
      taskDir: dir,
    }),
    (e) => isDshError(e) && e.code === "LAUNCH_FAILED" && /does not exist/.test(e.message),
  );
  await assert.rejects(fresh.run(["list-sessions"]), /no server running|error connecting/);
  await assert.rejects(
    runtime.launch({
      taskId: "tnocwd000001",
      name: "w",
      argv: ["true"],
      env: { "BAD-NAME": "x" },
      cwd: dir,
      taskDir: dir,
    }),
    (e) => isDshError(e) && e.code === "LAUNCH_FAILED" && /BAD-NAME/.test(e.message),
  );
  await fresh.kill();
});

test("tmux: a one-word argv is exec'd, not run by sh -c", async () => {
  const runtime = rt();
  const marker = join(dir, "pwned-single");
  const h = await runtime.launch({
    taskId: "tsingle00001",
    name: "single",
    argv: [`nope-${Date.now()} $(touch ${marker})`],
    env: {},
    cwd: dir,
    taskDir: dir,
  });
  await waitFor("the child to exit", async () => !(await runtime.isAlive(h)));
  assert.deepEqual(await runtime.exitStatus(h), { code: 127, signal: null });
  assert.equal(existsSync(marker), false);
  await runtime.close(h);
});

test("tmux: kill -9 of the child is seen as a dead pane with the signal, by polling and by watch", async () => {
  const runtime = rt();
  const h: RuntimeHandle = await runtime.launch({
    taskId: "tkill0000001",
    name: "victim",
    argv: [process.execPath, "-e", "setInterval(() => {}, 1000)"],
    env: {},
    cwd: dir,
    taskDir: dir,
  });
  assert.ok(h.pid && h.pid > 0);
  assert.equal(await runtime.isAlive(h), true);
  const events: RuntimeEvent[] = [];
  const stop = runtime.watch!(h, (e) => events.push(e));
  process.kill(h.pid!, "SIGKILL");
  await waitFor("the watch event", async () => events.length > 0);
  stop();
  assert.deepEqual(events, [{ type: "exited", exit: { code: null, signal: "SIGKILL" } }]);
  assert.equal(await runtime.isAlive(h), false);
  assert.deepEqual(await runtime.exitStatus(h), { code: null, signal: "SIGKILL" });
  await runtime.close(h);
  // A closed pane is "gone" to a new watcher.
  const gone: RuntimeEvent[] = [];
  const stop2 = runtime.watch!(h, (e) => gone.push(e));
  await waitFor("the gone event", async () => gone.length > 0);
  stop2();
  assert.deepEqual(gone, [{ type: "gone" }]);
});

test("tmux: close kills a live child and sendKeys reaches it", async () => {
  const runtime = rt();
  const h = await runtime.launch({
    taskId: "tclose000001",
    name: "sigint",
    argv: [
      process.execPath,
      "-e",
      "process.stdin.setRawMode(true); process.stdin.on('data', d => process.stdout.write('KEY:' + JSON.stringify(d.toString()) + '\\n')); setInterval(() => {}, 1000)",
    ],
    env: {},
    cwd: dir,
    taskDir: dir,
  });
  await waitFor("the child to start", async () => runtime.isAlive(h));
  await new Promise((r) => setTimeout(r, 300)); // raw mode set
  await runtime.sendKeys(h, ["Escape"]);
  await waitFor("the Escape key", async () => /KEY:"\\u001b"/.test(await runtime.readOutput(h)));
  const pid = h.pid!;
  await runtime.close(h);
  await waitFor("the child process to die", async () => {
    try {
      process.kill(pid, 0);
      return false;
    } catch {
      return true;
    }
  });
  assert.equal(await runtime.isAlive(h), false);
});

test("tmux: find rebuilds the handle launch returned for the task's live pane only", async () => {
  const runtime = rt();
  const where = (taskId: string) => ({ taskId, taskDir: join(dir, "tasks", taskId), name: `worker-${taskId}` });
  const launch = (taskId: string, argv: string[]) => runtime.launch({ ...where(taskId), argv, env: {}, cwd: dir });
  const forever = [process.execPath, "-e", "setInterval(() => {}, 1000)"];
  // A neighbour task's pane first, so the search must tell panes apart (not take the first or the newest).
  const other = await launch("tfindother01", forever);
  const h = await launch("tfindtmux001", forever);
  const quick = await launch("tfinddead001", [process.execPath, "-e", "process.exit(0)"]);
  // A fresh runtime on the same server stands for the next daemon.
  const next = rt();
  assert.deepEqual(await next.find!(where("tfindtmux001")), h);
  assert.deepEqual(await next.find!(where("tfindother01")), other);
  await waitFor("the quick child's exit", async () => (await runtime.exitStatus(quick)) !== null);
  assert.equal(await next.find!(where("tfinddead001")), undefined, "a dead pane (remain-on-exit) is not a live child");
  assert.equal(await next.find!(where("tnever000001")), undefined, "a task never launched");
  await next.close(h);
  assert.equal(await next.find!(where("tfindtmux001")), undefined, "a closed pane");
  await runtime.close(other);
  await runtime.close(quick);
  const none = createTmuxRuntime({ socketName: `${tmux.socketName}-none`, configFile: "/dev/null" });
  assert.equal(await none.find!(where("tfindtmux001")), undefined, "no tmux server at all");
});

test("tmux: a server left with no session (its windows killed, the server kept up) reads as gone, not as tmux broken", async () => {
  // tmux answers "no current target" to list-panes on a server that has no session left (it lingers while a client
  // is attached, or with exit-empty off). That is "the pane is gone", never "tmux could not run".
  const empty = privateTmux("dsh-test-empty");
  try {
    const runtime = createTmuxRuntime({ socketName: empty.socketName, configFile: "/dev/null" });
    const where = { taskId: "temptysrv001", taskDir: join(dir, "tasks", "temptysrv001"), name: "worker-empty" };
    const h = await runtime.launch({
      ...where,
      argv: [process.execPath, "-e", "setInterval(() => {}, 1000)"],
      env: {},
      cwd: dir,
    });
    assert.equal(await runtime.isAlive(h), true);
    await empty.run(["set-option", "-g", "exit-empty", "off", ";", "kill-session", "-t", h.tmuxSession!]);
    await assert.rejects(empty.run(["list-panes", "-a"]), /no current target/, "the server is up with no session");
    assert.equal(await runtime.isAlive(h), false);
    assert.equal(await runtime.exitStatus(h), null);
    assert.equal(await runtime.agentState!(h), "missing");
    assert.equal(await runtime.readOutput(h), "");
    await runtime.close(h);
    assert.equal(await runtime.find!(where), undefined);
    await assert.rejects(runtime.sendText(h, "hello"), (e) => isDshError(e) && e.code === "PANE_GONE");
  } finally {
    await empty.kill();
  }
});
