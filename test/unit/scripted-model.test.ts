import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa } from "execa";
import { startScriptedModel, type Script } from "../../fixtures/scripted-model/server.js";
import { selectStep, validateScript } from "../../fixtures/scripted-model/script.js";
import { preparePiAgentDir } from "../../fixtures/scripted-model/agent-dir.js";

const root = join(import.meta.dirname, "..", "..", "..");

type Msg = { role: string; content?: unknown; tool_calls?: unknown };
const user = (text: string): Msg => ({ role: "user", content: [{ type: "text", text }] });
const assistant = (text = ""): Msg => ({ role: "assistant", content: text });
const tool = (text: string): Msg => ({ role: "tool", content: text });

interface Reassembled {
  status: number;
  text: string;
  thinking: string;
  finish: string | null;
  usage: { prompt_tokens: number; completion_tokens: number } | null;
  toolCalls: { id: string; name: string; arguments: string }[];
  chunks: number;
  errorBody?: unknown;
}

/** POSTs like pi does and reassembles the SSE stream the way an OpenAI client would. */
async function call(url: string, messages: Msg[]): Promise<Reassembled> {
  const res = await fetch(`${url}/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "scripted-model", stream: true, messages }),
  });
  const out: Reassembled = {
    status: res.status,
    text: "",
    thinking: "",
    finish: null,
    usage: null,
    toolCalls: [],
    chunks: 0,
  };
  const raw = await res.text();
  if (res.status !== 200) return { ...out, errorBody: JSON.parse(raw) };
  for (const frame of raw.split("\n\n")) {
    const data = frame.replace(/^data: /, "").trim();
    if (!data || data === "[DONE]") continue;
    out.chunks++;
    const c = JSON.parse(data);
    if (c.usage) out.usage = c.usage;
    const ch = c.choices?.[0];
    if (!ch) continue;
    if (ch.finish_reason) out.finish = ch.finish_reason;
    if (ch.delta.content) out.text += ch.delta.content;
    if (ch.delta.reasoning_content) out.thinking += ch.delta.reasoning_content;
    for (const t of ch.delta.tool_calls ?? []) {
      const slot = (out.toolCalls[t.index] ??= { id: "", name: "", arguments: "" });
      if (t.id) slot.id = t.id;
      if (t.function?.name) slot.name = t.function.name;
      if (t.function?.arguments) slot.arguments += t.function.arguments;
    }
  }
  return out;
}

const script: Script = {
  conversations: [
    {
      name: "fail",
      match: "please fail",
      steps: [{ httpError: { status: 500, message: "scripted upstream failure" } }],
    },
    { name: "regex", match: "/^task-\\d+$/", steps: [{ text: "regex matched" }] },
    {
      name: "tools",
      match: "write things",
      steps: [
        {
          thinking: "I will write two files.",
          toolCalls: [
            { name: "write", arguments: { path: "a.txt", content: "alpha ".repeat(20) } },
            { name: "crew_report", arguments: { status: "done", summary: "ünïcode ✓ summary" } },
          ],
          usage: { prompt: 77, completion: 5 },
        },
        { text: ["first ", "second ", "third"] },
        { match: "finalize now", text: "final answer" },
      ],
    },
    { name: "any", match: "needle-in-system", matchIn: "any", steps: [{ text: "found in any message" }] },
    { name: "default", steps: [{ text: "default reply" }] },
  ],
};

test("conversation matching: substring, /regex/, matchIn any, and the default; first match wins", () => {
  const pick = (msgs: Msg[]) => selectStep(script, msgs)?.conversation.name;
  assert.equal(pick([user("please fail now")]), "fail");
  assert.equal(pick([user("task-42")]), "regex");
  assert.equal(pick([user("task-42 extra")]), "default");
  assert.equal(pick([{ role: "system", content: "needle-in-system" }, user("hi")]), "any");
  // The first user message decides, not later ones.
  assert.equal(pick([user("hello"), assistant("x"), user("please fail")]), "default");
  assert.equal(selectStep({ conversations: [{ match: "x", steps: [] }] }, [user("y")]), null);
});

test("step selection: by assistant count, reactive steps on the last message, done past the end", () => {
  const base = [user("write things")];
  assert.equal(selectStep(script, base)?.stepIndex, 0);
  assert.equal(selectStep(script, [...base, assistant(), tool("ok"), tool("ok")])?.stepIndex, 1);
  const settled = [...base, assistant(), tool("ok"), tool("ok"), assistant("third")];
  assert.equal(selectStep(script, [...settled, user("finalize now please")])?.stepIndex, 2);
  const past = selectStep(script, [...settled, user("something else")]);
  assert.equal(past?.stepIndex, null);
  assert.deepEqual(past?.step, { text: "done" });
  const repeat = selectStep({ conversations: [{ steps: [{ text: "a" }, { text: "b" }], afterEnd: "repeat" }] }, [
    user("q"),
    assistant(),
    assistant(),
    assistant(),
  ]);
  assert.equal(repeat?.step.text, "b");
});

test("a reactive step with matchIn sinceAssistant sees every message after the last assistant one, not only the last", () => {
  const s: Script = {
    conversations: [
      {
        steps: [
          { text: "first" },
          { match: "COMPACT-ME", matchIn: "sinceAssistant", text: "summary" },
          { match: "COMPACT-ME", text: "last only" },
        ],
      },
    ],
  };
  // The prompt is followed by a status message an extension sent with it: the prompt is not the last message.
  const msgs = [user("q"), assistant("a"), user("please COMPACT-ME now"), user('{"crew_status":[]}')];
  assert.equal(selectStep(s, msgs)?.stepIndex, 1);
  // Before the last assistant message does not count.
  assert.equal(selectStep(s, [user("COMPACT-ME early"), assistant("a"), user("other")])?.stepIndex, null);
  // The default (last message only) needs the text in the last message.
  const lastOnly: Script = {
    conversations: [{ steps: [{ text: "first" }, { match: "COMPACT-ME", text: "last only" }] }],
  };
  assert.equal(selectStep(lastOnly, msgs)?.stepIndex, null);
  assert.equal(selectStep(lastOnly, msgs.slice(0, 3))?.stepIndex, 1);
  assert.throws(
    () => validateScript({ conversations: [{ steps: [{ match: "x", matchIn: "everywhere" }] }] }),
    /steps\[0\]\.matchIn/,
  );
});

test("validateScript names the bad field", () => {
  assert.throws(() => validateScript({}), /invalid script at root/);
  assert.throws(
    () => validateScript({ conversations: [{ steps: [{ toolCalls: [{ arguments: {} }] }] }] }),
    /conversations\[0\]\.steps\[0\]\.toolCalls\[0\]\.name/,
  );
  assert.throws(
    () => validateScript({ conversations: [{ steps: [{ httpError: { status: 200, message: "" } }] }] }),
    /httpError\.status/,
  );
  assert.throws(() => validateScript({ conversations: [{ steps: [{ delayMs: -1 }] }] }), /delayMs/);
});

test("server streams text, thinking and tool calls whose arguments reassemble; errors and the request log", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-sm-"));
  const logPath = join(dir, "requests.jsonl");
  const m = await startScriptedModel({ script, logPath });
  try {
    assert.match(m.url, /^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const r1 = await call(m.url, [user("write things")]);
    assert.equal(r1.status, 200);
    assert.equal(r1.thinking, "I will write two files.");
    assert.equal(r1.finish, "tool_calls");
    assert.deepEqual(r1.usage, { prompt_tokens: 77, completion_tokens: 5, total_tokens: 82 });
    assert.deepEqual(
      r1.toolCalls.map((t) => [t.id, t.name]),
      [
        ["call_0_0", "write"],
        ["call_0_1", "crew_report"],
      ],
    );
    assert.deepEqual(JSON.parse(r1.toolCalls[0]!.arguments), { path: "a.txt", content: "alpha ".repeat(20) });
    assert.deepEqual(JSON.parse(r1.toolCalls[1]!.arguments), { status: "done", summary: "ünïcode ✓ summary" });
    assert.ok(r1.chunks >= 8, `tool arguments must arrive in several chunks, got ${r1.chunks}`);

    const r2 = await call(m.url, [user("write things"), assistant(), tool("ok"), tool("ok")]);
    assert.equal(r2.text, "first second third");
    assert.equal(r2.finish, "stop");
    assert.deepEqual(r2.toolCalls, []);

    const r3 = await call(m.url, [user("please fail")]);
    assert.equal(r3.status, 500);
    assert.deepEqual((r3.errorBody as { error: { message: string } }).error.message, "scripted upstream failure");

    const none = await startScriptedModel({ script: { conversations: [{ match: "zzz", steps: [] }] } });
    const r4 = await call(none.url, [user("hello")]);
    await none.close();
    assert.equal(r4.status, 400);
    assert.match(JSON.stringify(r4.errorBody), /add a default conversation/);

    const log = readFileSync(logPath, "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      log.map((r) => [r.seq, r.conversation, r.step]),
      [
        [1, "tools", 0],
        [2, "tools", 1],
        [3, "fail", 0],
      ],
    );
    assert.deepEqual(
      m.requests().map((r) => r.seq),
      [1, 2, 3],
    );
    assert.equal((log[1].body as { messages: Msg[] }).messages.length, 4);
  } finally {
    await m.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test("concurrent requests of different conversations are answered independently", async () => {
  const m = await startScriptedModel({
    script: {
      conversations: [
        { match: "slow", steps: [{ text: "slow reply", delayMs: 150, chunkDelayMs: 20 }] },
        { steps: [{ text: "fast reply" }] },
      ],
    },
  });
  try {
    const order: string[] = [];
    const track = (p: Promise<Reassembled>) => p.then((r) => (order.push(r.text), r));
    const [slow, fast] = await Promise.all([track(call(m.url, [user("slow")])), track(call(m.url, [user("quick")]))]);
    assert.equal(slow.text, "slow reply");
    assert.equal(fast.text, "fast reply");
    // The fast answer was not held up behind the slow one (sent at the same time, finished first).
    assert.deepEqual(order, ["fast reply", "slow reply"]);
  } finally {
    await m.close();
  }
});

test("CLI prints its URL as one JSON line, serves the script file, and rejects a bad script clearly", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-sm-cli-"));
  const server = join(root, "dist", "fixtures", "scripted-model", "server.js");
  try {
    writeFileSync(join(dir, "bad.json"), JSON.stringify({ conversations: "nope" }));
    const bad = await execa(process.execPath, [server, "--script", join(dir, "bad.json")], { reject: false });
    assert.equal(bad.exitCode, 2);
    assert.match(bad.stderr, /invalid script at root/);

    writeFileSync(join(dir, "ok.json"), JSON.stringify({ conversations: [{ steps: [{ text: "from file" }] }] }));
    const child = execa(process.execPath, [server, "--script", join(dir, "ok.json"), "--log", join(dir, "log.jsonl")], {
      reject: false,
    });
    const line = await new Promise<string>((resolve, reject) => {
      child.stdout.once("data", (d: Buffer) => resolve(d.toString()));
      child.once("exit", () => reject(new Error("server exited early")));
    });
    const info = JSON.parse(line) as { url: string; port: number };
    assert.equal(info.url, `http://127.0.0.1:${info.port}/v1`);
    assert.equal((await call(info.url, [user("x")])).text, "from file");
    child.kill("SIGTERM");
    const done = await child;
    assert.equal(done.exitCode, 0);
    assert.equal(readFileSync(join(dir, "log.jsonl"), "utf8").trim().split("\n").length, 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("preparePiAgentDir writes models.json and retry settings and returns an offline env", () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-sm-agent-"));
  try {
    const off = preparePiAgentDir(dir, "http://127.0.0.1:1/v1");
    assert.equal(off.model, "scripted/scripted-model");
    assert.deepEqual(Object.keys(off.env).sort(), [
      "HOME",
      "PI_CODING_AGENT_DIR",
      "PI_OFFLINE",
      "PI_SKIP_VERSION_CHECK",
    ]);
    const models = JSON.parse(readFileSync(join(off.env.PI_CODING_AGENT_DIR!, "models.json"), "utf8"));
    assert.equal(models.providers.scripted.baseUrl, "http://127.0.0.1:1/v1");
    assert.equal(models.providers.scripted.models[0].id, "scripted-model");
    const settingsPath = join(off.env.PI_CODING_AGENT_DIR!, "settings.json");
    assert.deepEqual(JSON.parse(readFileSync(settingsPath, "utf8")), {
      retry: { enabled: false, provider: { maxRetries: 0 } },
    });
    preparePiAgentDir(dir, "http://127.0.0.1:1/v1", { retry: true });
    const on = JSON.parse(readFileSync(settingsPath, "utf8"));
    assert.equal(on.retry.enabled, true);
    assert.equal(on.retry.maxRetries, 1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
