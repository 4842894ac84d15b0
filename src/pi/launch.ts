// Builds the pi command line for a child (an argv, never a shell string) and finds a runnable pi.
import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { execa } from "execa";
import { DshError } from "../core/errors.js";

export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh", "max"] as const;

export interface PiCommandOptions {
  /** "interactive" for a terminal pane (needs a TTY stdin), "rpc" for a headless child driven over stdin. */
  mode: "interactive" | "rpc";
  /** provider/id, e.g. "anthropic/claude-sonnet-4-5"; pi's default when absent. */
  model?: string;
  thinking?: string;
  /** Absolute path of the session JSONL; pi creates it lazily (after the first assistant message). */
  sessionPath: string;
  /** Absolute paths; loaded with -e after -ne, so only these extensions run. */
  extensionPaths: string[];
  /** Interactive only: auto-submitted as the first message. In rpc mode send a prompt command on stdin. */
  initialPrompt?: string;
  /** The child's working directory (the spawner sets it; checked here so a bad path fails before spawning). */
  cwd: string;
  /** Passed through before our own flags. */
  extraArgs?: string[];
  /** Environment for pi resolution (DSH_HERDR_PI_BIN, PATH); defaults to process.env. */
  env?: Record<string, string | undefined>;
}

/** Both pi lines dsh-herdr is tested on, and the Node each needs. */
export const PI_INSTALL_HINT =
  "npm i -g @earendil-works/pi-coding-agent for pi 1.x on Node >= 22.19, or npm i -g @mariozechner/pi-coding-agent@0.73.1 on Node 20";

/** Package root from the compiled file: dist/src/pi → root. */
const packageRoot = join(import.meta.dirname, "..", "..", "..");

function isExecutableFile(p: string): boolean {
  try {
    if (!statSync(p).isFile()) return false;
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string, pathVar: string | undefined): string | null {
  for (const dir of (pathVar ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    if (isExecutableFile(p)) return p;
  }
  return null;
}

/** DSH_HERDR_PI_BIN, else `pi` on PATH, else this package's node_modules/.bin/pi. */
export function resolvePiBin(env: Record<string, string | undefined> = process.env): string {
  const override = env.DSH_HERDR_PI_BIN;
  if (override) {
    const p = override.includes("/") ? override : onPath(override, env.PATH);
    if (p && isExecutableFile(p)) return p;
    throw new DshError(
      "PI_NOT_FOUND",
      `DSH_HERDR_PI_BIN=${override} is not an executable file; point it at a pi binary or unset it`,
    );
  }
  const found = onPath("pi", env.PATH) ?? join(packageRoot, "node_modules", ".bin", "pi");
  if (isExecutableFile(found)) return found;
  throw new DshError(
    "PI_NOT_FOUND",
    `pi was not found: install it (${PI_INSTALL_HINT}) or set DSH_HERDR_PI_BIN to its path`,
  );
}

export function buildPiCommand(opts: PiCommandOptions): { argv: string[] } {
  const bad = (msg: string): never => {
    throw new DshError("BAD_PARAMS", msg);
  };
  if (opts.mode !== "interactive" && opts.mode !== "rpc")
    bad(`pi mode must be "interactive" or "rpc", got ${String(opts.mode)}`);
  // pi reads a --session value without "/" as a session-id prefix, so insist on an absolute .jsonl path.
  if (!isAbsolute(opts.sessionPath) || !opts.sessionPath.endsWith(".jsonl")) {
    bad(`sessionPath must be an absolute path ending in .jsonl, got ${JSON.stringify(opts.sessionPath)}`);
  }
  for (const e of opts.extensionPaths) {
    if (!isAbsolute(e))
      bad(
        `extension path must be absolute (pi resolves relative ones against the child's cwd), got ${JSON.stringify(e)}`,
      );
  }
  if (!isAbsolute(opts.cwd)) bad(`cwd must be an absolute path, got ${JSON.stringify(opts.cwd)}`);
  if (opts.model !== undefined && (opts.model.trim() === "" || opts.model.startsWith("-"))) {
    bad(`model must be a model pattern like provider/id, got ${JSON.stringify(opts.model)}`);
  }
  if (opts.thinking !== undefined && !(THINKING_LEVELS as readonly string[]).includes(opts.thinking)) {
    bad(`thinking must be one of ${THINKING_LEVELS.join(", ")}, got ${JSON.stringify(opts.thinking)}`);
  }
  if (opts.initialPrompt !== undefined && opts.mode === "rpc") {
    bad('pi ignores positional prompts in rpc mode; send {"type":"prompt","message":...} on its stdin instead');
  }

  const argv = [resolvePiBin(opts.env), ...(opts.extraArgs ?? [])];
  if (opts.mode === "rpc") argv.push("--mode", "rpc");
  if (opts.model !== undefined) argv.push("--model", opts.model);
  if (opts.thinking !== undefined) argv.push("--thinking", opts.thinking);
  argv.push("--session", opts.sessionPath, "-ne");
  for (const e of opts.extensionPaths) argv.push("-e", e);
  if (opts.initialPrompt !== undefined && opts.initialPrompt !== "") {
    // pi's parser takes a leading "-" as a flag and a leading "@" as a file to inline, and has no "--";
    // a leading space keeps the prompt a plain message.
    const p = opts.initialPrompt;
    argv.push(p.startsWith("-") || p.startsWith("@") ? ` ${p}` : p);
  }
  return { argv };
}

/** The resolved pi binary and its version (from `pi --version`, which prints on stderr in 0.73.1). */
export async function findPi(
  env: Record<string, string | undefined> = process.env,
): Promise<{ path: string; version: string }> {
  const path = resolvePiBin(env);
  const r = await execa(path, ["--version"], {
    env,
    extendEnv: false,
    stdin: "ignore",
    reject: false,
    timeout: 30_000,
  });
  const version = /\d+\.\d+\.\d+\S*/.exec(`${r.stdout}\n${r.stderr}`)?.[0];
  if (r.exitCode !== 0 || !version) {
    throw new DshError(
      "PI_NOT_FOUND",
      `${path} --version failed (exit ${r.exitCode ?? r.signal}): ${r.stderr || r.stdout || r.shortMessage}; check the pi install or DSH_HERDR_PI_BIN`,
    );
  }
  return { path, version };
}
