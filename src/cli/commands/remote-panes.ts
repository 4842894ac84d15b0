// logs and open of a task relayed to another machine (src/daemon/relay/relay.ts): its child, pane and output are there.
// `logs` runs that machine's own `dsh-herdr logs <its task id>` over ssh, with the machine's entry in config.json
// (the same key, known_hosts and command the daemon's link uses), and streams what it prints. `open` needs a
// terminal there: with one it runs `ssh -t ... open <its task id>`; without one (or --json) it prints that command.
import { safeText } from "../format/safe.js";
import { spawnSync } from "node:child_process";
import { execa } from "execa";
import { DshError, ERROR_CODES, type ErrorCode } from "../../core/errors.js";
import { machineTarget, sshArgv, sshErrorLine, type MachineSpec } from "../../core/machines.js";
import { resolveSpec } from "../../link/link.js";
import { loadConfig } from "../../store/config.js";
import type { CliContext } from "../common/context.js";
import { printJson } from "../common/io.js";

export interface RemoteRef {
  label: string;
  taskId: string;
}

async function machineOf(ctx: CliContext, taskId: string, remote: RemoteRef): Promise<MachineSpec> {
  // The relay records the task before that machine answers the spawn; until then there is no task there to ask.
  if (remote.taskId === "")
    throw new DshError(
      "BAD_STATE",
      `task ${taskId} is still being started on machine ${remote.label} (its id there is not known yet); try again shortly, or see \`dsh-herdr show ${taskId}\``,
    );
  const m = (await loadConfig(ctx.home, ctx.io.env)).machines?.[remote.label];
  if (!m)
    throw new DshError(
      "MACHINE_UNKNOWN",
      `task ${taskId} runs on machine ${remote.label} (task ${remote.taskId} there), which is no longer in config.json; add it again with \`dsh-herdr machine add ${remote.label} --ssh USER@HOST\``,
    );
  return resolveSpec(m, ctx.io.env);
}

/** The remote CLI's own error line (`dsh-herdr: CODE: message`) as ours, or ssh's failure as MACHINE_UNREACHABLE. */
function remoteFailure(remote: RemoteRef, m: MachineSpec, exitCode: number | undefined, stderr: string): DshError {
  if (exitCode === 255) {
    const line = sshErrorLine(stderr) ?? "ssh exited with code 255";
    return new DshError(
      "MACHINE_UNREACHABLE",
      `machine ${remote.label} (${machineTarget(m)}) is unreachable: ${line}; check it with \`dsh-herdr machine check ${remote.label}\``,
      { label: remote.label, sshError: line },
    );
  }
  // `dsh-herdr: CODE: message`, or with --json `{"error":{"code","message"}}` (src/cli/main.ts).
  const said = /^dsh-herdr: ([A-Z_]+): (.*)$/m.exec(stderr);
  let code = said?.[1];
  let message = said?.[2];
  if (!said) {
    try {
      const j = JSON.parse(stderr.trim().split("\n").at(-1) ?? "") as { error?: { code?: string; message?: string } };
      code = j.error?.code;
      message = j.error?.message;
    } catch {
      /* not the CLI's own words */
    }
  }
  if (code && (ERROR_CODES as readonly string[]).includes(code))
    return new DshError(code as ErrorCode, `on machine ${remote.label}: ${message ?? ""}`, { label: remote.label });
  return new DshError(
    "RUNTIME_UNAVAILABLE",
    `\`dsh-herdr\` on machine ${remote.label} failed (exit ${exitCode ?? "?"}): ${sshErrorLine(stderr) ?? "no message"}`,
    { label: remote.label },
  );
}

export async function remoteLogs(
  ctx: CliContext,
  taskId: string,
  remote: RemoteRef,
  o: { lines: number; follow?: boolean; raw?: boolean; json?: boolean },
): Promise<void> {
  const m = await machineOf(ctx, taskId, remote);
  const args = [
    "logs",
    remote.taskId,
    "-n",
    String(o.lines),
    ...(o.follow ? ["-f"] : []),
    ...(o.raw ? ["--raw"] : []),
    ...(o.json ? ["--json"] : []),
  ];
  const ssh = execa("ssh", sshArgv(m, args), {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    buffer: false,
    reject: false,
    env: ctx.io.env,
    extendEnv: false,
    cancelSignal: ctx.signal,
  });
  let out = "";
  let err = "";
  ssh.stdout!.on("data", (c: Buffer) => {
    // --json is one object to rewrite; plain output streams through as it comes (logs -f).
    if (o.json) out += c.toString("utf8");
    else ctx.io.out(safeText(c.toString("utf8"))); // a remote's output: escaped (safe.ts)
  });
  ssh.stderr!.on("data", (c: Buffer) => {
    if (err.length < 65_536) err += c.toString("utf8");
  });
  const r = await ssh;
  if (ctx.signal.aborted) return; // Ctrl+C ends a follow; exit 0 as for a local task
  if (r.exitCode !== 0) throw remoteFailure(remote, m, r.exitCode, err);
  if (o.json) {
    const j = JSON.parse(out) as { runtime?: string; output?: string };
    printJson(ctx.io, {
      taskId,
      machine: remote.label,
      remoteTaskId: remote.taskId,
      runtime: j.runtime,
      output: j.output,
    });
  }
}

/** A POSIX shell word (for printing a command a user can paste). */
function shellWord(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`;
}

export async function remoteOpen(
  ctx: CliContext,
  taskId: string,
  remote: RemoteRef,
  runtime: string | undefined,
  o: { json?: boolean },
): Promise<void> {
  if (runtime === "headless")
    throw new DshError(
      "BAD_STATE",
      `task ${taskId} runs headless on machine ${remote.label} and has no pane; read its output with \`dsh-herdr logs ${taskId} -f\``,
    );
  const m = await machineOf(ctx, taskId, remote);
  // -t instead of the link's -T: the remote `open` attaches to a tmux window (or focuses a Herdr pane) there.
  const argv = ["ssh", "-t", ...sshArgv(m, ["open", remote.taskId]).filter((a) => a !== "-T")];
  if (o.json)
    return printJson(ctx.io, { taskId, machine: remote.label, remoteTaskId: remote.taskId, runtime, command: argv });
  if (!ctx.io.isTTY) return ctx.io.out(argv.map(shellWord).join(" ") + "\n");
  const r = spawnSync(argv[0]!, argv.slice(1), { stdio: "inherit", env: ctx.io.env });
  if (r.status === 255)
    throw new DshError(
      "MACHINE_UNREACHABLE",
      `ssh to machine ${remote.label} (${machineTarget(m)}) failed; check it with \`dsh-herdr machine check ${remote.label}\``,
    );
  if (r.status !== 0) ctx.exitCode = r.status ?? 1;
}

/** One row of a machine's own `gc --json` plan, or why that machine's plan could not be had. */
export type RemoteGcRow = Record<string, unknown> & { machine: string };

/**
 * gc of the tasks relayed to a machine: their worktrees and branches are there, so that machine's own `gc` decides
 * (the same rules, its own dry-run record). Runs `gc [--yes] --json` over ssh; a machine that cannot be reached is
 * one `skip` row saying why, and the local gc still happens.
 */
export async function remoteGc(ctx: CliContext, label: string, yes: boolean): Promise<RemoteGcRow[]> {
  const remote = { label, taskId: "" };
  let m: MachineSpec;
  try {
    const spec = (await loadConfig(ctx.home, ctx.io.env)).machines?.[label];
    if (!spec) throw new DshError("MACHINE_UNKNOWN", `machine ${label} is no longer in config.json`);
    m = resolveSpec(spec, ctx.io.env);
  } catch (e) {
    return [{ machine: label, action: "skip", reason: (e as Error).message }];
  }
  const r = await execa("ssh", sshArgv(m, ["gc", ...(yes ? ["--yes"] : []), "--json"]), {
    stdin: "ignore",
    reject: false,
    env: ctx.io.env,
    extendEnv: false,
    cancelSignal: ctx.signal,
  });
  if (r.exitCode !== 0)
    return [{ machine: label, action: "skip", reason: remoteFailure(remote, m, r.exitCode, String(r.stderr)).message }];
  try {
    const j = JSON.parse(String(r.stdout)) as { plan?: Record<string, unknown>[] };
    return (j.plan ?? []).map((p) => ({ ...p, machine: label }));
  } catch {
    return [{ machine: label, action: "skip", reason: `machine ${label}'s gc did not answer in JSON` }];
  }
}
