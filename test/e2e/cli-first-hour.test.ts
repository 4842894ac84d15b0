// A new user's first hour with the real CLI: usage mistakes exit 2 wherever they are found (MODEL_UNKNOWN from the
// daemon), completion offers the values of --machine, --model and --level, `list` in a pty that reports 0 columns
// still prints a table, and the demo runs under a global git config that signs every commit.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { execa } from "execa";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { bin, startCliHarness, type CliHarness } from "./cli-harness.js";

const SCRIPT: Script = {
  conversations: [
    {
      name: "quick",
      match: "QUICK",
      afterEnd: "repeat",
      steps: [{ toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "ok" } }] }],
    },
  ],
};

let h: CliHarness;
before(async () => {
  h = await startCliHarness(SCRIPT);
});
after(async () => {
  await h?.close();
});

test("a model name no alias defines is a usage error: exit 2 with MODEL_UNKNOWN naming the fix", async () => {
  const r = await h.cli(["spawn", "--model", "nosuchalias", "--prompt", "QUICK x"]);
  assert.equal(r.code, 2, `${r.out}\n${r.err}`);
  assert.match(r.err, /^dsh-herdr: MODEL_UNKNOWN: .*modelAliases/m);
});

test("completion: --machine and --model complete from the home's config, --level from the log levels", async () => {
  assert.equal((await h.cli(["config", "set", "modelAliases.fast", "scripted/scripted-model"])).code, 0);
  const added = await h.cli(["machine", "add", "builder-01", "--ssh", "dev@build.invalid"]);
  assert.equal(added.code, 0, added.err);
  const machines = await h.cli(["__complete", "machines"]);
  assert.deepEqual(machines.out.trim().split("\n"), ["builder-01"]);
  const models = await h.cli(["__complete", "models"]);
  assert.deepEqual(models.out.trim().split("\n"), ["fast", "scripted/scripted-model"]);
  const bash = await execa(
    "bash",
    [
      "-c",
      `source <(${JSON.stringify(process.execPath)} ${JSON.stringify(bin)} completion bash)
       complete_at() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _dsh_herdr; printf '%s\\n' "\${COMPREPLY[@]}"; }
       echo "M:$(complete_at dsh-herdr spawn --machine '' | tr '\\n' ' ')"
       echo "D:$(complete_at dsh-herdr spawn --model f | tr '\\n' ' ')"
       echo "L:$(complete_at dsh-herdr daemon log --level w | tr '\\n' ' ')"`,
    ],
    { env: { ...h.env, PATH: `${join(bin, "..")}:${process.env.PATH}` }, reject: false },
  );
  assert.equal(bash.exitCode, 0, String(bash.stderr));
  assert.match(String(bash.stdout), /^M:builder-01 $/m);
  assert.match(String(bash.stdout), /^D:fast $/m);
  assert.match(String(bash.stdout), /^L:warn $/m);
  for (const shell of ["zsh", "fish"]) {
    const s = await h.cli(["completion", shell]);
    assert.match(s.out, /__complete machines/, shell);
    assert.match(s.out, /__complete models/, shell);
    assert.match(s.out, /trace debug info warn error fatal/, shell);
  }
});

test("list in a pty that reports 0 columns prints the table at 80 columns, not blank rows", async () => {
  const spawned = await h.cli(["spawn", "--brief", "zero columns", "--prompt", "QUICK y", "--wait"]);
  assert.equal(spawned.code, 0, spawned.err);
  // python's pty: the CLI's stdout is a terminal whose size was never set (0 rows, 0 columns).
  const py = `
import os, pty, sys, fcntl, termios, struct
pid, fd = pty.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 0, 0, 0, 0))
out = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:
        break
    if not chunk:
        break
    out += chunk
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode("utf8", "replace"))
sys.exit(os.waitstatus_to_exitcode(status))
`;
  const r = await new Promise<{ code: number; out: string }>((resolve) => {
    execFile(
      "python3",
      ["-c", py, process.execPath, bin, "list", "--all"],
      { env: { ...process.env, ...h.env, NO_COLOR: "1", COLUMNS: "0" } },
      (e, out) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out }),
    );
  });
  assert.equal(r.code, 0, r.out);
  const lines = r.out
    .replace(/\r/g, "")
    .split("\n")
    .filter((l) => l.trim() !== "");
  assert.ok(lines.length >= 2, `a header and a row: ${JSON.stringify(r.out)}`);
  assert.match(lines[0]!, /ID/);
  assert.ok(
    lines.some((l) => l.includes("zero columns")),
    `the task's row: ${JSON.stringify(r.out)}`,
  );
  assert.ok(
    lines.every((l) => l.length <= 80),
    `no line over 80 columns: ${JSON.stringify(lines)}`,
  );
});

test("demo: a global git config that signs every commit (and cannot sign) does not break it", async () => {
  const home = mkdtempSync(join(tmpdir(), "dsh-demo-signing-"));
  try {
    const gitconfig = join(home, ".gitconfig");
    writeFileSync(gitconfig, "[commit]\n\tgpgsign = true\n[tag]\n\tgpgSign = true\n[gpg]\n\tprogram = /bin/false\n");
    const r = await execa(process.execPath, [bin, "demo", "--runtime", "headless"], {
      // The user's config as git finds it (the test run itself points GIT_CONFIG_GLOBAL at /dev/null).
      env: { HOME: home, GIT_CONFIG_GLOBAL: gitconfig, HERDR_SOCKET_PATH: join(home, "no-herdr.sock") },
      extendEnv: true,
      reject: false,
      timeout: 150_000,
      stdin: "ignore",
    });
    assert.equal(r.exitCode, 0, `${String(r.stdout)}\n${String(r.stderr)}`);
    assert.match(String(r.stdout), /^demo: ok/m);
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});
