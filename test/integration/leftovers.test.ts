// The sweep at the end of `npm test` and `npm run bench` (scripts/leftovers.mjs) ends only what its own run started.
// A user's real child names this checkout's child.js too (after `npm install -g .`, a symlink to the checkout); it
// must outlive a test run beside it, and so must the children of another run.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const root = join(import.meta.dirname, "..", "..", "..");
const CHILD_JS = join(root, "dist", "src", "extensions", "child.js");
const MARKER = "DSH_HERDR_TEST_RUN";
const started: ChildProcess[] = [];
const dirs: string[] = [];

after(() => {
  for (const p of started) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A process whose command line names this checkout's child.js, as a real pi child's does; `marker` undefined: none. */
function fakeChild(marker: string | undefined): ChildProcess {
  const home = mkdtempSync(join(tmpdir(), "dsh-other-home-"));
  dirs.push(home);
  const env: NodeJS.ProcessEnv = { ...process.env, DSH_HERDR_HOME: home };
  delete env[MARKER];
  delete env["NODE_TEST_CONTEXT"];
  if (marker !== undefined) env[MARKER] = marker;
  const p = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)", CHILD_JS], {
    env,
    cwd: home,
    stdio: "ignore",
  });
  started.push(p);
  return p;
}

const alive = (p: ChildProcess) => p.exitCode === null && p.signalCode === null;

/** Resolves once the process has exited (true) or after `ms` (false). */
const exited = (p: ChildProcess, ms: number) =>
  new Promise<boolean>((resolve) => {
    if (!alive(p)) return resolve(true);
    const t = setTimeout(() => resolve(false), ms);
    p.once("exit", () => {
      clearTimeout(t);
      resolve(true);
    });
  });

/** Waits until /proc shows the process's command line (spawn returns before exec). */
async function execd(p: ChildProcess): Promise<void> {
  for (let i = 0; i < 400; i++) {
    try {
      if (readFileSync(`/proc/${p.pid}/cmdline`, "utf8").includes(CHILD_JS)) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`process ${p.pid} never showed ${CHILD_JS} in its command line`);
}

test("leftovers: a test run beside a live child of another home leaves it alive", { timeout: 120_000 }, async () => {
  const foreign = fakeChild(undefined);
  await execd(foreign);
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env["NODE_TEST_CONTEXT"];
  const run = spawn(process.execPath, [join(root, "scripts", "run-tests.mjs"), "unit/keyed-queue"], {
    env,
    cwd: root,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  run.stdout!.on("data", (c: Buffer) => (out += c.toString("utf8")));
  run.stderr!.on("data", (c: Buffer) => (out += c.toString("utf8")));
  const code = await new Promise<number | null>((resolve) => run.once("exit", (c) => resolve(c)));
  assert.equal(code, 0, `run-tests failed:\n${out.slice(-4000)}`);
  assert.doesNotMatch(out, /left running/);
  assert.equal(await exited(foreign, 500), false, "the other home's child is still running");
});

test("leftovers: the sweep ends this run's children and nested runs' only", { timeout: 60_000 }, async () => {
  const mod = (await import(pathToFileURL(join(root, "scripts", "leftovers.mjs")).href)) as {
    reportLeftovers(root: string, label: string, runId: string): number;
    newRunId(env?: NodeJS.ProcessEnv): string;
  };
  const runId = mod.newRunId({});
  assert.ok(mod.newRunId({ [MARKER]: runId }).startsWith(`${runId}.`), "a nested run extends the outer id");
  const none = fakeChild(undefined);
  const ours = fakeChild(runId);
  const nested = fakeChild(`${runId}.inner`);
  const other = fakeChild(`${runId}x`); // another run whose id merely starts the same
  for (const p of [none, ours, nested, other]) await execd(p);

  const originalError = console.error;
  const said: string[] = [];
  console.error = (...a: unknown[]) => void said.push(a.join(" "));
  let n: number;
  try {
    n = mod.reportLeftovers(root, "leftovers-test", runId);
  } finally {
    console.error = originalError;
  }
  assert.equal(n, 2, said.join("\n"));
  assert.equal(await exited(ours, 10_000), true, "this run's child is ended");
  assert.equal(await exited(nested, 10_000), true, "a nested run's child is ended");
  assert.equal(await exited(none, 300), false, "a child without the marker lives");
  assert.equal(alive(other), true, "another run's child lives");
  assert.ok(said.some((l) => l.includes(String(ours.pid))));
  assert.ok(!said.some((l) => l.includes(` ${none.pid} `) || l.includes(` ${other.pid} `)));
});
