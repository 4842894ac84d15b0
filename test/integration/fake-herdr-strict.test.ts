// The fake Herdr is as strict as Herdr 0.8.2 where a looser fake would let our bugs through (raw requests on its
// socket, every message checked against Herdr's schema of the protocol it speaks): key names, control characters in
// agent arguments, requests refused as a whole, pane.list's workspace filter, the schema's methods the runtime may
// meet, a shell's exit, and agent.start typing `pi` into a shell whose start-up file decides which `pi` runs.
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startFakeHerdr, type FakeHerdr } from "../../fixtures/fake-herdr/server.js";
import { HERDR_PROTOCOLS, type HerdrProtocol, herdrSchemaErrors, schemaFor } from "../helpers/herdr-schema.js";
import { until } from "../helpers/wait.js";

type Reply = { id: string; result?: Record<string, unknown>; error?: { code: string; message: string } };

let dir: string;
let fake: FakeHerdr;
let n = 0;

/** One raw line to the fake, its one answer back. */
function raw(line: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const sock = createConnection(fake.socketPath);
    let buf = "";
    sock.on("connect", () => sock.write(`${line}\n`));
    sock.on("data", (c) => {
      buf += c.toString("utf8");
      const nl = buf.indexOf("\n");
      if (nl >= 0) {
        sock.destroy();
        resolve(JSON.parse(buf.slice(0, nl)) as Reply);
      }
    });
    sock.on("error", reject);
  });
}

const call = (method: string, params: Record<string, unknown>): Promise<Reply> =>
  raw(JSON.stringify({ id: `t${++n}`, method, params }));

async function ok(method: string, params: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await call(method, params);
  assert.ok(r.result, `${method}: ${JSON.stringify(r.error)}`);
  return r.result;
}

async function refused(method: string, params: Record<string, unknown>, code: string): Promise<Reply> {
  const r = await call(method, params);
  assert.equal(r.error?.code, code, `${method} ${JSON.stringify(params)} → ${JSON.stringify(r)}`);
  return r;
}

/**
 * agent.start on a pane just split: Herdr refuses with agent_pane_busy while the pane's shell is still starting, and
 * its own CLI retries (src/cli/agent.rs, pane_shell_is_initializing); so does this, for up to 10 s.
 */
async function startInFreshPane(params: Record<string, unknown>): Promise<Reply> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const r = await call("agent.start", params);
    if (r.error?.code !== "agent_pane_busy" || Date.now() >= deadline) return r;
    await new Promise((res) => setTimeout(res, 100));
  }
}

for (const p of HERDR_PROTOCOLS) describe(`fake Herdr, protocol ${p}`, () => suite(p));

function suite(protocol: HerdrProtocol): void {
  let paneId: string;
  let workspaceId: string;
  let tabId: string;
  let bin: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "fake-herdr-strict-"));
    bin = join(dir, "decoy");
    mkdirSync(bin);
    // The user's start-up file puts another `pi` first on PATH.
    writeFileSync(join(bin, "pi"), '#!/bin/sh\necho "decoy pi: $*"\nread line\n');
    chmodSync(join(bin, "pi"), 0o755);
    writeFileSync(join(dir, "rc"), `PATH=${bin}:$PATH; export PATH\n`);
    fake = await startFakeHerdr({ protocol, quietMs: 300, shellRc: join(dir, "rc") });
    const made = await ok("workspace.create", { cwd: dir, label: "strict", focus: false });
    paneId = (made.root_pane as { pane_id: string }).pane_id;
    workspaceId = (made.workspace as { workspace_id: string }).workspace_id;
    tabId = (made.tab as { tab_id: string }).tab_id;
  });

  after(async () => {
    for (const { kind, message } of fake.log)
      assert.equal(herdrSchemaErrors(schemaFor(kind, message as Record<string, unknown>), message, protocol), "");
    await fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("pane.send_keys: names Herdr's parser reads pass; any other is invalid_key and nothing is typed", async () => {
    for (const keys of [["Enter"], ["enter", "esc", "escape", "tab", "backspace"], ["ctrl+c", "C-c", "alt+x"]])
      await ok("pane.send_keys", { pane_id: paneId, keys });
    await ok("pane.send_keys", { pane_id: paneId, keys: ["shift+tab", "f1", "minus", "plus", "a", "up"] });
    for (const bad of ["NotAKey", "PageUp", "pageup", "M-x", "prefix+c", "ctrl+NotAKey"]) {
      const r = await refused("pane.send_keys", { pane_id: paneId, keys: ["a", bad] }, "invalid_key");
      assert.equal(r.error?.message, `unsupported key ${bad}`);
    }
    await refused("pane.send_input", { pane_id: paneId, text: "x", keys: ["NotAKey"] }, "invalid_key");
  });

  test("agent.start: any control character in args is invalid_agent_argument", async () => {
    for (const arg of ["a\tb", "\x1b[31m", "del\x7f", "c1\u0085", "two\nlines"])
      await refused(
        "agent.start",
        { name: "w-ctl", kind: "pi", pane_id: paneId, args: [arg] },
        "invalid_agent_argument",
      );
    await refused(
      "agent.start",
      { name: "w-ctl", kind: "pi", pane_id: paneId, timeout_ms: 100 },
      "invalid_agent_timeout",
    );
  });

  test('a request that does not parse as a whole is answered with id "" and invalid_request', async () => {
    for (const line of [
      "not json",
      JSON.stringify({ id: "u1", method: "pane.frobnicate", params: {} }),
      JSON.stringify({ id: "u2", method: "pane.get", params: {} }),
      JSON.stringify({ id: "u3", method: "pane.send_keys", params: { pane_id: paneId, keys: "enter" } }),
    ]) {
      const r = await raw(line);
      assert.deepEqual([r.id, r.error?.code], ["", "invalid_request"], `${line} → ${JSON.stringify(r)}`);
      assert.match(r.error?.message ?? "", /^invalid request: /);
    }
    assert.equal(fake.rejected.length >= 4, true);
  });

  test("pane.list filters by workspace; an unknown workspace is workspace_not_found", async () => {
    const other = await ok("workspace.create", { cwd: dir, label: "other", focus: false });
    const otherId = (other.workspace as { workspace_id: string }).workspace_id;
    const mine = (await ok("pane.list", { workspace_id: workspaceId })).panes as { workspace_id: string }[];
    assert.ok(mine.length > 0 && mine.every((p) => p.workspace_id === workspaceId));
    const all = (await ok("pane.list", {})).panes as unknown[];
    assert.ok(all.length > mine.length);
    await refused("pane.list", { workspace_id: "w0nope" }, "workspace_not_found");
    await ok("workspace.close", { workspace_id: otherId });
    await refused("workspace.get", { workspace_id: otherId }, "workspace_not_found");
  });

  test("the schema's other methods: workspace.get, tab.list/get/close, pane.wait_for_output, events.wait, session.snapshot", async () => {
    assert.equal(
      ((await ok("workspace.get", { workspace_id: workspaceId })).workspace as { label: string }).label,
      "strict",
    );
    const tabs = (await ok("tab.list", { workspace_id: workspaceId })).tabs as { tab_id: string }[];
    assert.ok(tabs.some((t) => t.tab_id === tabId));
    assert.equal(((await ok("tab.get", { tab_id: tabId })).tab as { tab_id: string }).tab_id, tabId);
    await refused("tab.get", { tab_id: `${workspaceId}:t0` }, "tab_not_found");
    const extra = await ok("tab.create", { workspace_id: workspaceId, cwd: dir, focus: false });
    const extraTab = (extra.tab as { tab_id: string }).tab_id;
    const extraPane = (extra.root_pane as { pane_id: string }).pane_id;
    await ok("pane.send_input", { pane_id: extraPane, text: "echo marker-$((40+2))", keys: ["Enter"] });
    const matched = await ok("pane.wait_for_output", {
      pane_id: extraPane,
      source: "recent",
      match: { type: "substring", value: "marker-42" },
      timeout_ms: 5_000,
    });
    assert.equal(matched.type, "output_matched");
    assert.equal(matched.matched_line, "marker-42");
    await refused(
      "pane.wait_for_output",
      { pane_id: extraPane, source: "recent", match: { type: "regex", value: "never-\\d{9}" }, timeout_ms: 300 },
      "timeout",
    );
    await refused(
      "events.wait",
      { match_event: { event: "pane_exited", pane_id: extraPane }, timeout_ms: 300 },
      "timeout",
    );
    const waiting = call("events.wait", {
      match_event: { event: "pane_closed", pane_id: extraPane },
      timeout_ms: 10_000,
    });
    await ok("tab.close", { tab_id: extraTab });
    const closed = (await waiting).result as { type: string; event: { event: string; data: { pane_id: string } } };
    assert.deepEqual(
      [closed.type, closed.event.event, closed.event.data.pane_id],
      ["wait_matched", "pane_closed", extraPane],
    );
    const snap = (await ok("session.snapshot", {})).snapshot as Record<string, unknown[]> & { protocol: number };
    assert.equal(snap.protocol, protocol);
    assert.ok(snap.panes!.some((p) => (p as { pane_id: string }).pane_id === paneId));
    assert.ok(!snap.panes!.some((p) => (p as { pane_id: string }).pane_id === extraPane));
  });

  test("agent.start types `pi` into the shell: its start-up file picks the program; the shell outlives the agent", async () => {
    const events: Record<string, unknown>[] = [];
    const sub = createConnection(fake.socketPath);
    sub.on("connect", () =>
      sub.write(
        `${JSON.stringify({
          id: "sub",
          method: "events.subscribe",
          params: { subscriptions: [{ type: "pane.exited" }, { type: "pane.agent_detected" }] },
        })}\n`,
      ),
    );
    let buf = "";
    sub.on("data", (c) => {
      buf += c.toString("utf8");
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        events.push(JSON.parse(buf.slice(0, nl)) as Record<string, unknown>);
        buf = buf.slice(nl + 1);
      }
    });
    try {
      const pane = (await ok("pane.split", { target_pane_id: paneId, direction: "right", cwd: dir, focus: false }))
        .pane as { pane_id: string };
      const reply = await startInFreshPane({
        name: "w-typed",
        kind: "pi",
        pane_id: pane.pane_id,
        args: ["--model", "x y"],
        timeout_ms: 10_000,
      });
      assert.ok(reply.result, `agent.start: ${JSON.stringify(reply.error)}`);
      const started = reply.result;
      assert.deepEqual(started.argv, ["pi", "--model", "x y"], "the bare command Herdr typed");
      const read = await ok("pane.read", { pane_id: pane.pane_id, source: "recent", format: "text" });
      await until(
        "the decoy's banner",
        async () => {
          const r = await ok("pane.read", { pane_id: pane.pane_id, source: "recent", format: "text" });
          return String((r.read as { text: string }).text).includes("decoy pi: --model x y") ? true : undefined;
        },
        10_000,
      );
      assert.ok(read);
      await refused("agent.start", { name: "w-again", kind: "pi", pane_id: pane.pane_id }, "agent_pane_busy");
      await ok("pane.send_input", { pane_id: pane.pane_id, text: "bye", keys: ["Enter"] });
      await until(
        "the release",
        async () =>
          events.some((e) => (e.data as { released?: boolean } | undefined)?.released === true) ? true : undefined,
        10_000,
      );
      const info = (await ok("pane.get", { pane_id: pane.pane_id })).pane as { agent?: string };
      assert.equal(info.agent, undefined, "the agent is gone");
      assert.ok(!events.some((e) => e.event === "pane_exited"), "the shell lives on: no pane_exited");
      // The shell is an available shell again; when it exits, pane_exited follows (a plain shell pane).
      await ok("pane.send_input", { pane_id: pane.pane_id, text: "exit", keys: ["Enter"] });
      await until(
        "pane_exited",
        async () =>
          events.some((e) => e.event === "pane_exited" && (e.data as { pane_id: string }).pane_id === pane.pane_id)
            ? true
            : undefined,
        10_000,
      );
    } finally {
      sub.destroy();
    }
  });

  test("#3853 mode: agent.start leaves the agent launch_pending and answers agent_not_ready; prompts too", async () => {
    const pane = (await ok("pane.split", { target_pane_id: paneId, direction: "down", cwd: dir, focus: false }))
      .pane as { pane_id: string };
    fake.misbehave({ detection: "launch_pending" });
    try {
      const reply = await startInFreshPane({
        name: "w-pending",
        kind: "pi",
        pane_id: pane.pane_id,
        timeout_ms: 10_000,
      });
      assert.equal(reply.error?.code, "agent_not_ready", JSON.stringify(reply));
      const agent = (await ok("agent.get", { target: "w-pending" })).agent as Record<string, unknown>;
      assert.equal(agent.launch_pending, true);
      await refused("agent.prompt", { target: "w-pending", text: "hi" }, "agent_not_ready");
    } finally {
      fake.misbehave({ detection: "screen" });
      await ok("pane.close", { pane_id: pane.pane_id });
    }
  });
}
