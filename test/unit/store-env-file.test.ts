// <home>/env: the grammar both systemd's EnvironmentFile= and a POSIX shell read alike (src/store/env-file.ts).
// Every value the writer can produce is read back the same by the parser and by a real `sh` sourcing the file.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { DshError } from "../../src/core/errors.js";
import { formatEnvValue, parseEnvFile, readEnvFile, updateEnvFile } from "../../src/store/env-file.js";
import { parseUnit } from "../../src/cli/doctor/unit.js";
import { unitText } from "../../src/cli/commands/daemon/daemon-extras.js";

const VALUES = [
  "",
  "plain",
  "sk-ant-api03-AbC_d.e/f+g=h:i,j@k%l",
  "two words",
  " leading and trailing ",
  "it's",
  'say "hi"',
  "$HOME and `pwd` and \\ backslash",
  "it's $HOME",
  "~/not/expanded",
  "#not a comment",
  "ümlaut ✓ 漢字",
];

test("every value the writer produces parses back to itself, and sh reads the file the same way", () => {
  const dir = mkdtempSync(join(tmpdir(), "dsh-envfile-"));
  try {
    const text = VALUES.map((v, i) => `V${i}=${formatEnvValue(v)}\n`).join("");
    const parsed = parseEnvFile(text);
    assert.deepEqual([...parsed.values()], VALUES);
    const file = join(dir, "env");
    writeFileSync(file, text);
    const out = execFileSync(
      "sh",
      [
        "-c",
        `set -a; . "${file}"; node -e 'process.stdout.write(JSON.stringify(Object.fromEntries(Object.entries(process.env).filter(([k]) => /^V\\d+$/.test(k)))))'`,
      ],
      {
        encoding: "utf8",
        env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/home/someone" },
      },
    );
    const fromSh = JSON.parse(out) as Record<string, string>;
    VALUES.forEach((v, i) => assert.equal(fromSh[`V${i}`], v, `V${i}`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("comments, blanks, a later assignment winning; bad lines are CONFIG_INVALID naming the line, never its value", () => {
  const m = parseEnvFile("# keys\n\n  ; also a comment\nA=1\nB='x y'\nA=2\n");
  assert.deepEqual(
    [...m],
    [
      ["B", "x y"],
      ["A", "2"],
    ],
  );
  const bad: [string, RegExp][] = [
    ["A=two words\n", /line 1: an unquoted value/],
    ["A=1\nB='open\n", /line 2: a single quote that is not closed/],
    ['A="$HOME"\n', /line 1: an unescaped \$/],
    ["A='x' trailing\n", /line 1: text after the closing quote/],
    ["export A=1\n", /line 1: "export A" is not a variable name/],
    ["NOEQUALS\n", /line 1: no = in the line/],
    ["A=1\r\n", /line 1: a carriage return/],
    ['A="x\\n"\n', /line 1: a backslash in double quotes/],
  ];
  for (const [text, msg] of bad) {
    assert.throws(
      () => parseEnvFile(text, "/h/env"),
      (e: DshError) => e.code === "CONFIG_INVALID" && msg.test(e.message) && e.message.startsWith("/h/env line"),
      text,
    );
  }
  assert.throws(() => formatEnvValue("a\nb"), /newline/);
});

test("updateEnvFile keeps comments and order, replaces in place, removes, writes 0600", async () => {
  const home = mkdtempSync(join(tmpdir(), "dsh-envfile-"));
  try {
    writeFileSync(join(home, "env"), "# mine\nA=1\nB=2\nA=3\n", { mode: 0o644 });
    await updateEnvFile(
      home,
      new Map([
        ["A", "new value"],
        ["C", "c"],
        ["B", undefined],
      ]),
    );
    assert.equal(readFileSync(join(home, "env"), "utf8"), "# mine\nA='new value'\nC=c\n");
    assert.equal(statSync(join(home, "env")).mode & 0o777, 0o600);
    assert.deepEqual(
      [...(readEnvFile(home).vars ?? [])],
      [
        ["A", "new value"],
        ["C", "c"],
      ],
    );
    await assert.rejects(updateEnvFile(home, new Map([["1BAD", "x"]])), /not a variable name/);
    assert.equal(readEnvFile(join(home, "nothing")).vars, undefined, "no file: no variables");
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("the unit install-unit writes reads back: Environment= values (quoted, %) and the EnvironmentFile=", () => {
  const text = unitText({
    home: "/home/me/.dsh/herdr",
    nodePath: "/usr/bin/node",
    binPath: "/opt/dsh herdr/bin/dsh-herdr",
    path: "/a b:/usr/bin:/100%",
    lang: "en_US.UTF-8",
    piDir: "/home/me/pi agent",
  });
  const u = parseUnit(text, "/x/dsh-herdr.service");
  assert.equal(u.env.get("PATH"), "/a b:/usr/bin:/100%");
  assert.equal(u.env.get("LANG"), "en_US.UTF-8");
  assert.equal(u.env.get("PI_CODING_AGENT_DIR"), "/home/me/pi agent");
  assert.equal(u.env.get("DSH_HERDR_HOME"), "/home/me/.dsh/herdr");
  assert.deepEqual(u.envFiles, ["/home/me/.dsh/herdr/env"]);
  assert.match(text, /^Environment="PATH=\/a b:\/usr\/bin:\/100%%"$/m);
});
