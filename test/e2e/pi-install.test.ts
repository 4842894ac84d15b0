// `pi install` of this package as a user does it, with the real pi under test (0.73, or 1.x through
// DSH_HERDR_PI_BIN) in a temp HOME and PI_CODING_AGENT_DIR: from a git URL served over http on 127.0.0.1 (pi clones
// it and runs `npm install --omit=dev`, so the build must not need a dev dependency), and from a local checkout that
// was never built (pi loads it as it is: the model and the TUI must hear the fix, not meet missing tools). The
// package is this working tree's files (tracked and new), committed into a fresh repository.
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { execa } from "execa";
import { cpSync, createReadStream, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join, normalize } from "node:path";
import { repoRoot, startPiHarness, type PiHarness } from "../helpers/pi.js";

const INSTALL_TIMEOUT_MS = 600_000;

/** The npm cache of the user running the tests (the harness moves HOME, which would leave npm an empty cache). */
const npmCache = execFileSync("npm", ["config", "get", "cache"], { encoding: "utf8" }).trim();

let tmp: string;
let checkout: string;
let server: Server;
let url: string;

/** A repository of this working tree's files at one commit, as a fresh clone of it would be: nothing built. */
function packageRepo(dir: string): string {
  const files = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: repoRoot,
    encoding: "utf8",
  })
    .split("\0")
    .filter((f) => f && existsSync(join(repoRoot, f)) && statSync(join(repoRoot, f)).isFile());
  for (const f of files) cpSync(join(repoRoot, f), join(dir, f));
  const git = (...args: string[]) => execFileSync("git", args, { cwd: dir, stdio: "pipe" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "-m", "package");
  return dir;
}

/** git's "dumb" http protocol: the bare repository's files, served as they are. */
function serveStatic(root: string): Promise<Server> {
  const s = createServer((req, res) => {
    const path = normalize(join(root, decodeURIComponent((req.url ?? "/").split("?")[0] ?? "/")));
    if (!path.startsWith(root) || !existsSync(path) || !statSync(path).isFile()) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200);
    createReadStream(path).pipe(res);
  });
  return new Promise((resolve) => s.listen(0, "127.0.0.1", () => resolve(s)));
}

/** Env for `pi install`: the harness's home and agent dir, network allowed (pi skips installs offline). */
function installEnv(h: PiHarness): NodeJS.ProcessEnv {
  return {
    ...process.env,
    ...h.env,
    PI_OFFLINE: "",
    DSH_HERDR_HOME: join(h.dir, "dsh-home"),
    npm_config_cache: npmCache,
    npm_config_prefer_offline: "true",
    npm_config_audit: "false",
    npm_config_fund: "false",
  };
}

/** The tool names and system prompt of the first model request a `pi -p` run made. */
async function firstRequest(h: PiHarness): Promise<{ tools: string[]; system: string }> {
  const r = await h.runPi(["--model", h.modelName, "-p", "hello"], {
    env: { DSH_HERDR_HOME: join(h.dir, "dsh-home") },
    timeoutMs: 120_000,
  });
  assert.equal(r.exitCode, 0, `pi -p failed: ${String(r.stderr)}`);
  const body = h.model.requests()[0]?.body as {
    tools?: { function?: { name?: string } }[];
    messages: { role: string; content: unknown }[];
  };
  const system = body.messages.find((m) => m.role === "system" || m.role === "developer")?.content;
  return {
    tools: (body.tools ?? []).map((t) => t.function?.name ?? ""),
    system: typeof system === "string" ? system : JSON.stringify(system),
  };
}

describe("pi install of dsh-herdr", { timeout: INSTALL_TIMEOUT_MS + 60_000 }, () => {
  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), "dsh-pi-install-"));
    checkout = packageRepo(join(tmp, "checkout"));
    // pi takes a git URL with an owner and a name, as on a forge: /<owner>/<name>.git.
    const bare = join(tmp, "srv", "you", "dsh-herdr.git");
    mkdirSync(join(tmp, "srv", "you"), { recursive: true });
    execFileSync("git", ["clone", "-q", "--bare", checkout, bare]);
    execFileSync("git", ["update-server-info"], { cwd: bare });
    server = await serveStatic(join(tmp, "srv"));
    const addr = server.address();
    assert.ok(addr && typeof addr === "object");
    url = `http://127.0.0.1:${addr.port}/you/dsh-herdr.git`;
  });

  after(async () => {
    await new Promise<void>((r) => server?.close(() => r()));
    rmSync(tmp, { recursive: true, force: true });
  });

  test("from a git URL over http: npm install --omit=dev builds it, and the crew tools are registered", async () => {
    const h = await startPiHarness({ script: { conversations: [{ steps: [{ text: "ok" }] }] }, prefix: "dsh-pi-i-" });
    try {
      // Not spawnSync: the http server answering git's clone runs on this process's event loop.
      const r = await execa(h.piBin, ["install", `git:${url}`], {
        cwd: h.work,
        env: installEnv(h),
        reject: false,
        stdin: "ignore",
        timeout: INSTALL_TIMEOUT_MS,
      });
      assert.equal(r.exitCode, 0, `pi install failed:\n${r.stdout}\n${r.stderr}`);
      const { tools } = await firstRequest(h);
      for (const name of ["crew_spawn", "crew_respond", "crew_list", "crew_status"])
        assert.ok(tools.includes(name), `${name} is not among the tools pi sent: ${tools.join(", ")}`);
    } finally {
      await h.cleanup();
    }
  });

  test("from a checkout that was never built: the model and the user are told to run npm ci there", async () => {
    const h = await startPiHarness({ script: { conversations: [{ steps: [{ text: "ok" }] }] }, prefix: "dsh-pi-u-" });
    try {
      assert.equal(existsSync(join(checkout, "dist")), false);
      const r = spawnSync(h.piBin, ["install", checkout], {
        cwd: h.work,
        env: installEnv(h),
        encoding: "utf8",
        timeout: 120_000,
      });
      assert.equal(r.status, 0, `pi install failed:\n${r.stdout}\n${r.stderr}`);
      const { tools, system } = await firstRequest(h);
      assert.equal(tools.includes("crew_spawn"), false);
      assert.match(system, /dsh-herdr is not built: run `npm ci` in /);
    } finally {
      await h.cleanup();
    }
  });
});
