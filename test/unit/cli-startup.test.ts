// Which modules a CLI call loads: `--version`, `list` and `show` answer in about a bare node's start-up only if they
// leave out what they do not use (execa and the runtimes, ajv, pino, yaml, and string-width unless a text needs it).
// Counted in the real bin/dsh-herdr (test/helpers/module-log.ts), so the test holds on any machine; the time figures
// are bench/cli-startup.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dshBin } from "../helpers/cli.js";
import { modulesLoadedBy } from "../helpers/module-log.js";
import type { CliContext } from "../../src/cli/common/context.js";
import { processIo } from "../../src/cli/common/io.js";
import { buildProgram } from "../../src/cli/main.js";

/** The non-builtin modules `dsh-herdr <args>` loads (ES and CommonJS), as file URLs, on a fresh home `seed` fills. */
function modulesOf(args: string[], seed?: (home: string) => void): { loaded: string[]; stdout: string } {
  const dir = mkdtempSync(join(tmpdir(), "dsh-cli-startup-"));
  try {
    seed?.(join(dir, "home"));
    const r = modulesLoadedBy(args, { ...process.env, DSH_HERDR_HOME: join(dir, "home"), NO_COLOR: "1" });
    return { loaded: r.loaded, stdout: r.stdout };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// string-width builds emoji tables as it loads (about 50 ms of CPU): plain text is measured without it.
const HEAVY = [
  "/node_modules/execa/",
  "/node_modules/ajv",
  "/node_modules/pino",
  "/node_modules/yaml/",
  "/node_modules/string-width/",
  "/node_modules/get-east-asian-width/",
];

// `show` of an id with no task: a found result is checked against its task dir (verify's reader, which parses result.md
// with yaml), loaded only then.
for (const args of [["--version"], ["list"], ["show", "abcd"]]) {
  test(`dsh-herdr ${args.join(" ")} loads none of execa, ajv, pino, yaml, string-width`, () => {
    const { loaded } = modulesOf(args);
    assert.ok(
      loaded.some((u) => u.endsWith("/bin/dsh-herdr")),
      "the hook saw the CLI load",
    );
    const heavy = loaded.filter((u) => HEAVY.some((h) => u.includes(h)));
    assert.deepEqual(heavy, []);
  });
}

test("dsh-herdr list of a home with tasks prints its table and loads none of them (plain text needs no string-width)", () => {
  const { loaded, stdout } = modulesOf(["list", "--all"], (home) => {
    const ids = ["tmxcj2mdnwpy", "tmxcj2mt20t6"];
    for (const id of ids) mkdirSync(join(home, "tasks", id), { recursive: true });
    const line = (taskId: string, brief: string) =>
      JSON.stringify({
        taskId,
        owner: "cli",
        status: "closed",
        createdAt: 1796614331534,
        brief,
        cwd: "/tmp/repo",
        row: {
          schemaVersion: 1,
          taskId,
          status: "closed",
          role: "worker",
          agent: { name: `worker-model-${taskId.slice(-4)}`, kind: "pi", model: "scripted/scripted-model" },
          summary: "Added src/greeting.js.",
          timing: { createdAt: 1796614331534 },
          brief,
          cwd: "/tmp/repo",
          owner: "cli",
        },
      });
    writeFileSync(
      join(home, "tasks", "index.jsonl"),
      `${line(ids[0]!, "add a greeting module")}\n${line(ids[1]!, `document the CLI usage ${"and more ".repeat(20)}`)}\n`,
    );
  });
  assert.match(stdout, /worker-model-nwpy/);
  assert.match(stdout, /…/, "a long brief is cut");
  assert.deepEqual(
    loaded.filter((u) => HEAVY.some((h) => u.includes(h))),
    [],
  );
});

test("dsh-herdr --version loads only main and what it needs (no command module)", () => {
  const { loaded } = modulesOf(["--version"]);
  assert.deepEqual(
    loaded.filter((u) => u.includes("/cli/commands/")),
    [],
  );
  // 12 today (the bin, main and its few imports, commander); 278 before commands were loaded by need.
  assert.ok(loaded.length <= 20, `--version loaded ${loaded.length} modules:\n${loaded.join("\n")}`);
});

test("every command and alias loads exactly the group that registers it", async () => {
  const ctx = {
    io: processIo(),
    home: "/nonexistent",
    connect: () => Promise.reject(new Error("not in this test")),
    exitCode: 0,
    signal: new AbortController().signal,
  } as CliContext;
  const all = await buildProgram(ctx, { args: ["help"] });
  assert.ok(all.commands.length > 20);
  for (const c of all.commands)
    for (const name of [c.name(), ...c.aliases()]) {
      const one = await buildProgram(ctx, { args: [name] });
      assert.ok(
        one.commands.some((x) => x.name() === c.name()),
        `\`dsh-herdr ${name}\` does not load the module that registers it`,
      );
    }
});

test("dsh-herdr completion bash still names every command (it loads them all)", () => {
  const r = spawnSync(process.execPath, [dshBin, "completion", "bash"], { encoding: "utf8", timeout: 60_000 });
  assert.equal(r.status, 0, r.stderr);
  for (const name of ["spawn", "list", "show", "watch", "land", "logs", "machine", "daemon", "doctor", "demo"])
    assert.match(r.stdout, new RegExp(`\\b${name}\\b`), `completion names ${name}`);
});
