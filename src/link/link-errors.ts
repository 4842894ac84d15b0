// What a link says when the machine cannot be reached or the connection drops: MACHINE_UNREACHABLE with ssh's own
// error line (or its exit code) and the fix.
import { DshError } from "../core/errors.js";
import { machineTarget, sshErrorLine, sshFailureFix, type MachineSpec } from "../core/machines.js";

/** How much of ssh's stderr a link keeps (and puts in an error's details). */
export const STDERR_CAP = 8192;

/** A connection attempt failed: ssh's error line, or why the remote daemon never said hello. */
export function unreachable(
  label: string,
  m: MachineSpec,
  stderr: string,
  exitCode: number | undefined,
  reason?: string,
): DshError {
  const line = sshErrorLine(stderr);
  const why =
    line ??
    reason ??
    (exitCode !== undefined
      ? `ssh exited with code ${exitCode} and printed nothing`
      : "ssh ended before the remote daemon answered");
  const fix =
    exitCode === 255
      ? sshFailureFix(label, m, line)
      : exitCode === 127
        ? `\`${m.command ?? "dsh-herdr"}\` is not found there (not installed, or not on the PATH of a non-interactive ssh session): install dsh-herdr there (docs/remote.md), or point at it with \`dsh-herdr machine set ${label} --command /path/to/dsh-herdr\``
        : `the remote command \`${m.command ?? "dsh-herdr"} daemon connect\` failed there (exit ${exitCode ?? "?"}); fix it on that machine, or change it with \`dsh-herdr machine set ${label} --command CMD\``;
  return new DshError("MACHINE_UNREACHABLE", `machine ${label} (${machineTarget(m)}) is unreachable: ${why}; ${fix}`, {
    label,
    target: machineTarget(m),
    ...(line !== undefined ? { sshError: line } : {}),
    ...(exitCode !== undefined ? { exitCode } : {}),
    stderr: stderr.slice(0, STDERR_CAP),
  });
}

/** A link that was up dropped (ssh exited): it reconnects on its own. */
export function dropError(label: string, m: MachineSpec, exitCode: number | undefined, stderr: string): DshError {
  const line = sshErrorLine(stderr);
  return new DshError(
    "MACHINE_UNREACHABLE",
    `the link to machine ${label} (${machineTarget(m)}) dropped${line !== undefined ? `: ${line}` : exitCode !== undefined ? ` (ssh exit ${exitCode})` : ""}; it reconnects on its own`,
    {
      label,
      target: machineTarget(m),
      dropped: true,
      ...(line !== undefined ? { sshError: line } : {}),
      ...(exitCode !== undefined ? { exitCode } : {}),
    },
  );
}
