// Runs tmux on a private server (`tmux -L <socket>`) with argv arrays, never through a shell. tmux still parses
// its own argv in two places, so user-controlled strings are escaped here: an argument ending in ";" is a command
// separator to tmux, and -n / -c values are format-expanded ("#{...}").
import { execa } from "execa";
import { DshError } from "../../core/errors.js";

export interface TmuxServer {
  socketName: string;
  /** tmux -f: the config file read when the server starts (undefined: tmux's default lookup). */
  configFile?: string;
  /** The tmux binary (default "tmux"). */
  bin?: string;
}

export interface TmuxResult {
  ok: boolean;
  stdout: string;
  stderr: string;
}

/** Keep an argument literal through tmux's command parser: a trailing ";" would end the command. */
export function literalArg(arg: string): string {
  return arg.endsWith(";") ? `${arg.slice(0, -1)}\\;` : arg;
}

/** Keep a value literal through tmux format expansion (used for -n names and -c directories). */
export function literalFormat(value: string): string {
  return value.replaceAll("#", "##");
}

/**
 * Errors that mean "the thing is not there" rather than "tmux is broken". "no current target" is a server that is
 * still up with no session left (it lingers while a client is attached): none of its panes exist.
 */
export function isGoneError(stderr: string): boolean {
  return /can't find (pane|window|session)|no server running|error connecting to|no such (file|session)|server exited|no current target/i.test(
    stderr,
  );
}

/** Runs one tmux invocation; `;` elements in `args` separate commands (already-escaped args only). */
export async function runTmux(server: TmuxServer, args: string[], opts: { input?: string } = {}): Promise<TmuxResult> {
  // -u: tmux takes the client as UTF-8 whatever the locale. Without it, and with no UTF-8 LANG/LC_ALL/LC_CTYPE (a
  // systemd unit, cron, a container), tmux prints "_" for the tabs of every -F format and no pane is ever found.
  const argv = ["-u", "-L", server.socketName];
  if (server.configFile !== undefined) argv.push("-f", server.configFile);
  argv.push(...args);
  try {
    const r = await execa(server.bin ?? "tmux", argv, {
      reject: false,
      // The daemon may itself run inside tmux: never let children of our server point at the user's server.
      env: { TMUX: undefined, TMUX_PANE: undefined },
      ...(opts.input !== undefined ? { input: opts.input } : { stdin: "ignore" as const }),
      stripFinalNewline: false,
      timeout: 15_000,
    });
    if (r.failed && r.exitCode === undefined) {
      // execa's shortMessage quotes the whole command line, a launch's -e NAME=value pairs (the task token) with
      // it: the error names what failed, never the argv.
      throw new DshError(
        "RUNTIME_UNAVAILABLE",
        `tmux could not run (${r.timedOut ? "timed out after 15 s" : (r.originalMessage ?? r.code ?? "no message")}): install tmux 3.x or choose --runtime headless`,
      );
    }
    return { ok: r.exitCode === 0, stdout: String(r.stdout), stderr: String(r.stderr).trim() };
  } catch (e) {
    if (e instanceof DshError) throw e;
    const x = e as { originalMessage?: string; code?: string; message?: string };
    throw new DshError(
      "RUNTIME_UNAVAILABLE",
      `tmux could not run (${x.originalMessage ?? x.code ?? "no message"}): install tmux 3.x or choose --runtime headless`,
    );
  }
}

/** Like runTmux but a failure is an error with the given context. */
export async function mustTmux(
  server: TmuxServer,
  args: string[],
  what: string,
  opts: { input?: string } = {},
): Promise<string> {
  const r = await runTmux(server, args, opts);
  if (!r.ok) {
    const code = isGoneError(r.stderr) ? "PANE_GONE" : "RUNTIME_UNAVAILABLE";
    throw new DshError(code, `tmux ${what} failed on server ${server.socketName}: ${r.stderr || "no message"}`);
  }
  return r.stdout;
}
