// How a child starts in a Herdr pane without trusting the pane's shell to find it. Herdr panes run the user's
// interactive shell, which sources the user's start-up files: a bare `pi` typed there (what Herdr's `agent.start`
// types) runs whatever that shell resolves, and PATH set in the pane's env may be replaced. So the runtime writes a
// starter script into the task directory and types `exec <its absolute path>` into the shell: a path the shell cannot
// re-resolve. The starter sets the PATH the daemon chose, records its pid (the child's liveness, our own evidence
// rather than Herdr's agent detection), runs the program by its absolute path and records its exit code; `exec`
// hands it the pane, so when it ends the pane's process ends (Herdr: pane_exited), and no shell outlives the child.
import { readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { LaunchSpec } from "../types.js";

export interface StarterPaths {
  script: string;
  pidPath: string;
  exitPath: string;
}

export function starterPaths(taskDir: string): StarterPaths {
  return {
    script: join(taskDir, "herdr-start.sh"),
    pidPath: join(taskDir, "herdr-child.pid"),
    exitPath: join(taskDir, "herdr-child.exit"),
  };
}

/** POSIX single quoting; safe words stay bare, so the typed line reads the same in sh, bash, zsh and fish. */
export function shellQuote(word: string): string {
  return /^[A-Za-z0-9_./:=@%+-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/** Writes the starter (mode 0700) after clearing a previous attempt's pid and exit files; returns the typed line. */
export async function writeStarter(spec: LaunchSpec, path: string): Promise<{ paths: StarterPaths; line: string }> {
  const paths = starterPaths(spec.taskDir);
  await Promise.all([rm(paths.pidPath, { force: true }), rm(paths.exitPath, { force: true })]);
  const q = shellQuote;
  const script = [
    "#!/bin/sh",
    "# Written by dsh-herdr: starts this task's child in its Herdr pane, whatever the pane's shell set up.",
    `echo $$ > ${q(`${paths.pidPath}.tmp`)} && mv ${q(`${paths.pidPath}.tmp`)} ${q(paths.pidPath)}`,
    `PATH=${q(path)}; export PATH`,
    spec.argv.map(q).join(" "),
    `echo $? > ${q(`${paths.exitPath}.tmp`)} && mv ${q(`${paths.exitPath}.tmp`)} ${q(paths.exitPath)}`,
    "",
  ].join("\n");
  const tmp = `${paths.script}.tmp`;
  await writeFile(tmp, script, { mode: 0o700 });
  await rename(tmp, paths.script);
  return { paths, line: `exec ${q(paths.script)}` };
}

/** The starter's pid once it has run, else undefined. */
export async function readStarterPid(pidPath: string): Promise<number | undefined> {
  const text = await readFile(pidPath, "utf8").catch(() => "");
  const pid = Number(text.trim());
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
}

/** The child's exit code once the starter recorded it, else undefined. */
export async function readStarterExit(exitPath: string): Promise<number | undefined> {
  const text = await readFile(exitPath, "utf8").catch(() => "");
  const code = Number(text.trim());
  return text.trim() !== "" && Number.isInteger(code) ? code : undefined;
}

/** The starter with that pid still runs (checked against its command line where /proc has it: no reused pid). */
export async function starterAlive(pid: number, script: string): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => undefined);
  return cmdline === undefined || cmdline.split("\0").includes(script);
}
