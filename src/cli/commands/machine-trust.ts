// machine trust LABEL [--yes]: the machine's host key, so ssh (StrictHostKeyChecking=yes, never accept-new) can
// check it. `ssh -G` says where ssh really connects (HostName, Port, HostKeyAlias from ssh_config) and which
// known_hosts it reads; `ssh-keyscan` fetches the keys; their fingerprints are shown for the user to compare with the
// machine's own, and `--yes` appends them to the machine's known_hosts file. A different key already recorded for
// that host is refused (a changed host key is what a man in the middle looks like): the fix names `ssh-keygen -R`.
import { appendFileSync, chmodSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { dirname } from "node:path";
import { execa } from "execa";
import { DshError } from "../../core/errors.js";
import { machineTarget, sshErrorLine, type MachineSpec } from "../../core/machines.js";
import { resolveSpec } from "../../link/link.js";
import type { CliContext } from "../common/context.js";

export interface TrustPlan {
  label: string;
  /** The name ssh looks the key up by: `host`, `[host]:port`, or the HostKeyAlias. */
  host: string;
  knownHosts: string;
  /** known_hosts lines for the scanned keys, as they would be added. */
  lines: string[];
  /** `256 SHA256:… [host]:port (ED25519)` per key. */
  fingerprints: string[];
  /** Every scanned key is in the file already. */
  trusted: boolean;
}

interface SshView {
  hostname: string;
  port: number;
  hostKeyAlias?: string;
  knownHosts: string;
}

async function run(cmd: string, args: string[], ctx: CliContext, input?: string) {
  return execa(cmd, args, {
    reject: false,
    env: ctx.io.env,
    extendEnv: false,
    timeout: 30_000,
    ...(input !== undefined ? { input } : { stdin: "ignore" as const }),
  });
}

/** Where ssh connects for this entry and which known_hosts it checks, from `ssh -G`. */
async function sshView(ctx: CliContext, m: MachineSpec): Promise<SshView> {
  const args = ["-G", ...(m.port !== undefined ? ["-p", String(m.port)] : [])];
  if (m.knownHosts !== undefined) args.push("-o", `UserKnownHostsFile=${m.knownHosts}`);
  args.push("--", m.ssh);
  const r = await run("ssh", args, ctx);
  if (r.exitCode !== 0)
    throw new DshError(
      "MACHINE_UNREACHABLE",
      `\`ssh -G ${m.ssh}\` failed: ${sshErrorLine(String(r.stderr)) ?? `exit ${r.exitCode}`}`,
    );
  const conf = new Map<string, string>();
  for (const l of String(r.stdout).split("\n")) {
    const sp = l.indexOf(" ");
    if (sp > 0 && !conf.has(l.slice(0, sp))) conf.set(l.slice(0, sp), l.slice(sp + 1).trim());
  }
  const alias = conf.get("hostkeyalias");
  return {
    hostname: conf.get("hostname") ?? m.ssh.replace(/^.*@/, ""),
    port: Number(conf.get("port") ?? m.port ?? 22),
    ...(alias && alias !== "none" ? { hostKeyAlias: alias } : {}),
    knownHosts: m.knownHosts ?? (conf.get("userknownhostsfile") ?? "~/.ssh/known_hosts").split(/\s+/)[0]!,
  };
}

/** The key part of a known_hosts line (type and base64), skipping a marker and the host field. */
function keyOf(line: string): string | undefined {
  const f = line.trim().split(/\s+/);
  if (f[0]?.startsWith("@")) f.shift();
  return f.length >= 3 ? `${f[1]} ${f[2]}` : undefined;
}

/** Scan the machine's host keys and compare them with its known_hosts file. */
export async function trustPlan(ctx: CliContext, label: string, machine: MachineSpec): Promise<TrustPlan> {
  const m = resolveSpec(machine, ctx.io.env);
  const v = await sshView(ctx, m);
  const bare = v.hostname.replace(/^\[(.*)\]$/, "$1");
  const host = v.hostKeyAlias ?? (v.port === 22 ? bare : `[${bare}]:${v.port}`);
  const scan = await run("ssh-keyscan", ["-T", "10", "-p", String(v.port), bare], ctx);
  const keys = [
    ...new Set(
      String(scan.stdout)
        .split("\n")
        .filter((l) => l.trim() !== "" && !l.startsWith("#"))
        .map(keyOf)
        .filter((k): k is string => k !== undefined),
    ),
  ];
  if (keys.length === 0)
    throw new DshError(
      "MACHINE_UNREACHABLE",
      `ssh-keyscan got no host key from ${bare} port ${v.port} (machine ${label}, ${machineTarget(machine)}): ${sshErrorLine(String(scan.stderr)) ?? "no answer"}; check the address and port, and that sshd runs there`,
      { label },
    );
  const lines = keys.map((k) => `${host} ${k}`);
  const fp = await run("ssh-keygen", ["-lf", "-"], ctx, lines.join("\n") + "\n");
  const fingerprints = String(fp.stdout)
    .split("\n")
    .filter((l) => l.trim() !== "");
  // What the file already holds for that host (hashed entries too: ssh-keygen -F matches them).
  let known: string[] = [];
  if (existsSync(v.knownHosts)) {
    const f = await run("ssh-keygen", ["-F", host, "-f", v.knownHosts], ctx);
    known = String(f.stdout)
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("#"))
      .map(keyOf)
      .filter((k): k is string => k !== undefined);
  }
  if (known.length > 0 && !keys.some((k) => known.includes(k)))
    throw new DshError(
      "BAD_STATE",
      `the host key ${host} offers now is not the one ${v.knownHosts} holds for it: the machine was reinstalled, or someone is in between. Compare the fingerprint below with the one that machine shows (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub there); only when they match, remove the old key with \`ssh-keygen -R '${host}' -f ${v.knownHosts}\` and run \`dsh-herdr machine trust ${label} --yes\` again.\n${fingerprints.join("\n")}`,
      { label, host },
    );
  return {
    label,
    host,
    knownHosts: v.knownHosts,
    lines,
    fingerprints,
    trusted: known.length > 0,
  };
}

/** Append the plan's keys to its known_hosts (created 0600, its directory 0700, when missing). */
export function addHostKeys(plan: TrustPlan): void {
  mkdirSync(dirname(plan.knownHosts), { recursive: true, mode: 0o700 });
  const existed = existsSync(plan.knownHosts);
  const text = existed ? readFileSync(plan.knownHosts, "utf8") : "";
  const sep = text === "" || text.endsWith("\n") ? "" : "\n";
  appendFileSync(plan.knownHosts, sep + plan.lines.join("\n") + "\n", { mode: 0o600 });
  if (!existed) chmodSync(plan.knownHosts, 0o600);
}
