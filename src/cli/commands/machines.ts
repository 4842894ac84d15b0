// machine add|set|list|remove|check|trust: other machines, each running its own dsh-herdr daemon, reached over ssh
// (src/link/link.ts). Stored in config.json under `machines`; a running daemon follows a change at once (its link
// to a changed machine is made again). Setting one up step by step: docs/remote.md.
import type { Command } from "commander";
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { execa } from "execa";
import { DshError, isDshError } from "../../core/errors.js";
import {
  assertMachineLabel,
  assertPort,
  assertSshTarget,
  DEFAULT_REMOTE_COMMAND,
  machineTarget,
  sshArgv,
  sshErrorLine,
  sshFailureFix,
  type MachineSpec,
} from "../../core/machines.js";
import { connectMachine } from "../../link/link.js";
import { loadConfig, setConfigValue } from "../../store/config.js";
import { ensureHome, expandHome } from "../../store/home.js";
import type { CheckResult } from "../doctor/checks.js";
import type { Result } from "../../protocol/methods.js";
import type { CliContext } from "../common/context.js";
import { EXIT } from "../common/exit-codes.js";
import { printJson } from "../common/io.js";
import { packageVersion } from "../common/version.js";
import { daemonTook } from "./admin.js";
import { renderChecks } from "./doctor.js";
import { addHostKeys, trustPlan } from "./machine-trust.js";
import { examples, jsonOption, usage } from "../common/options.js";

interface AddOptions {
  ssh: string;
  port?: string;
  identity?: string;
  command?: string;
  knownHosts?: string;
  json?: boolean;
}

export interface MachineRow {
  label: string;
  target: string;
  reachable: boolean;
  version?: string;
  openTasks?: number;
  /** Why it is unreachable (ssh's own line when it printed one). */
  error?: string;
}

/** A machine's daemon.status (src/protocol/). */
type RemoteStatus = Result<"daemon.status">;

function flag<T>(f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw isDshError(e) && e.code === "BAD_PARAMS" ? usage(e.message) : e;
  }
}

function existingFile(path: string, what: string, env: NodeJS.ProcessEnv): string {
  const abs = resolve(expandHome(path, env));
  if (!existsSync(abs) || !statSync(abs).isFile())
    throw usage(`${what} ${abs} is not a file; give the path of an existing file`);
  return abs;
}

/** The entry fields given as options, checked (a usage error names the bad one). */
function specOf(o: Partial<AddOptions>, env: NodeJS.ProcessEnv): Partial<MachineSpec> {
  const spec: Partial<MachineSpec> = {};
  if (o.ssh !== undefined) spec.ssh = flag(() => assertSshTarget(o.ssh));
  if (o.port !== undefined) spec.port = flag(() => assertPort(o.port));
  if (o.identity !== undefined) spec.identity = existingFile(o.identity, "--identity", env);
  if (o.knownHosts !== undefined) spec.knownHosts = existingFile(o.knownHosts, "--known-hosts", env);
  if (o.command !== undefined) {
    if (o.command.trim() === "" || /[\n\r]/.test(o.command))
      throw usage("--command must be one non-empty line, e.g. --command dsh-herdr");
    spec.command = o.command.trim();
  }
  return spec;
}

async function machinesOf(ctx: CliContext): Promise<Record<string, MachineSpec>> {
  return (await loadConfig(ctx.home, ctx.io.env)).machines;
}

export function lookupMachine(machines: Record<string, MachineSpec>, label: string): MachineSpec {
  const m = Object.hasOwn(machines, label) ? machines[label] : undefined;
  if (m === undefined) {
    const known = Object.keys(machines);
    throw new DshError(
      "MACHINE_UNKNOWN",
      `no machine "${label}"${known.length ? ` (known: ${known.join(", ")})` : ""}; add it with \`dsh-herdr machine add ${label} --ssh USER@HOST\``,
    );
  }
  return m;
}

async function remoteStatus(ctx: CliContext, label: string, machine: MachineSpec): Promise<RemoteStatus> {
  const link = await connectMachine({ label, machine, version: packageVersion(), env: ctx.io.env, reconnect: false });
  try {
    return await link.client.request("daemon.status", {}, { timeoutMs: 20_000 });
  } finally {
    await link.close();
  }
}

async function probe(ctx: CliContext, label: string, machine: MachineSpec): Promise<MachineRow> {
  const row: MachineRow = { label, target: machineTarget(machine), reachable: false };
  try {
    const s = await remoteStatus(ctx, label, machine);
    return { ...row, reachable: true, version: s.version, openTasks: s.openTasks };
  } catch (e) {
    const err = isDshError(e) ? e : new DshError("INTERNAL", String(e));
    return {
      ...row,
      error: typeof err.details?.["sshError"] === "string" ? (err.details["sshError"] as string) : err.message,
    };
  }
}

function renderRows(rows: readonly MachineRow[]): string {
  if (rows.length === 0) return "no machines; add one with `dsh-herdr machine add LABEL --ssh USER@HOST`\n";
  const head = ["LABEL", "TARGET", "REACHABLE", "VERSION", "OPEN TASKS"];
  const cells = rows.map((r) => [
    r.label,
    r.target,
    r.reachable ? "yes" : "no",
    r.version ?? "-",
    r.openTasks === undefined ? "-" : String(r.openTasks),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i]!.length)));
  const line = (c: string[]) => c.map((v, i) => (i === c.length - 1 ? v : v.padEnd(widths[i]!))).join("  ");
  const out = [line(head), ...cells.map(line)];
  for (const r of rows) if (!r.reachable && r.error) out.push(`${r.label}: ${r.error}`);
  return out.join("\n") + "\n";
}

/** `<command> doctor --json` on the machine, over ssh with the link's options; `missing`: the command is not there. */
async function remoteDoctor(
  ctx: CliContext,
  label: string,
  machine: MachineSpec,
): Promise<{ ok: boolean; checks: CheckResult[]; missing?: string }> {
  const spec = {
    ...machine,
    ...(machine.identity ? { identity: expandHome(machine.identity, ctx.io.env) } : {}),
    ...(machine.knownHosts ? { knownHosts: expandHome(machine.knownHosts, ctx.io.env) } : {}),
  };
  const r = await execa("ssh", sshArgv(spec, ["doctor", "--json"]), {
    reject: false,
    stdin: "ignore",
    env: ctx.io.env,
    extendEnv: false,
    timeout: 120_000,
  });
  const line = sshErrorLine(String(r.stderr));
  if (r.exitCode === 255 || r.exitCode === undefined) {
    throw new DshError(
      "MACHINE_UNREACHABLE",
      `machine ${label} (${machineTarget(machine)}) is unreachable: ${line ?? r.shortMessage}; ${sshFailureFix(label, machine, line)}`,
      { label, ...(line ? { sshError: line } : {}) },
    );
  }
  // The remote shell could not find the command: dsh-herdr is not installed there (or not on ssh's PATH).
  if (r.exitCode === 127 || (String(r.stdout).trim() === "" && /not found|No such file or directory/.test(line ?? "")))
    return { ok: false, checks: [], missing: line ?? `exit ${r.exitCode}` };
  try {
    const parsed = JSON.parse(String(r.stdout).trim().split("\n").at(-1) ?? "") as { ok?: unknown; checks?: unknown };
    if (typeof parsed.ok === "boolean" && Array.isArray(parsed.checks))
      return { ok: parsed.ok, checks: parsed.checks as CheckResult[] };
  } catch {
    /* reported below */
  }
  const cmd = machine.command ?? DEFAULT_REMOTE_COMMAND;
  return {
    ok: false,
    checks: [
      {
        name: "doctor",
        level: "fail",
        detail: `\`${cmd} doctor --json\` printed no doctor report (exit ${r.exitCode})${line ? `: ${line}` : ""}`,
        fix: `check the command: dsh-herdr machine set ${label} --command CMD`,
      },
    ],
  };
}

export function registerMachineCommands(program: Command, ctx: CliContext): void {
  const machine = program
    .command("machine")
    .description("other machines that run their own dsh-herdr daemon, reached over ssh");

  const add = machine
    .command("add")
    .description("add a machine (stored in config.json; nothing is contacted: run `machine check` next)")
    .argument("<label>", "a short name, e.g. builder-01")
    .requiredOption("--ssh <user@host>", "where to ssh to")
    .option("--port <n>", "ssh port (default: ssh's own, usually 22)")
    .option("--identity <file>", "private key for ssh -i (default: ssh's own keys and agent)")
    .option(
      "--known-hosts <file>",
      "known_hosts to check the host key against (default: ~/.ssh/known_hosts); unknown keys are refused",
    )
    .option("--command <cmd>", `the dsh-herdr command line on that machine (default: ${DEFAULT_REMOTE_COMMAND})`);
  jsonOption(add);
  examples(add, [
    "dsh-herdr machine add builder --ssh dev@builder.lan",
    "dsh-herdr machine add gpu --ssh me@10.0.0.7 --port 2222 --identity ~/.ssh/id_gpu --command '~/.npm-global/bin/dsh-herdr'",
  ]);
  add.action(async (labelIn: string, o: AddOptions) => {
    const label = flag(() => assertMachineLabel(labelIn));
    const spec = specOf(o, ctx.io.env) as MachineSpec;
    await ensureHome(ctx.home);
    const machines = await machinesOf(ctx);
    if (Object.hasOwn(machines, label))
      throw usage(
        `machine "${label}" already exists (${machineTarget(machines[label]!)}); remove it first with \`dsh-herdr machine remove ${label}\``,
      );
    await setConfigValue(ctx.home, "machines", { ...machines, [label]: spec });
    if (o.json) printJson(ctx.io, { label, ...spec });
    else
      ctx.io.out(
        `added machine ${label} (${machineTarget(spec)}); check it with \`dsh-herdr machine check ${label}\`\n`,
      );
  });

  const set = machine
    .command("set")
    .description(
      "change a machine (what `add` takes; --unset drops an option); a running daemon takes it at once and links again",
    )
    .argument("<label>", "its label")
    .option("--ssh <user@host>", "where to ssh to")
    .option("--port <n>", "ssh port")
    .option("--identity <file>", "private key for ssh -i")
    .option("--known-hosts <file>", "known_hosts to check the host key against")
    .option("--command <cmd>", "the dsh-herdr command line on that machine")
    .option(
      "--unset <option>",
      "back to ssh's default: port, identity, known-hosts or command (repeatable)",
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    );
  jsonOption(set);
  examples(set, [
    "dsh-herdr machine set builder --command '~/.npm-global/bin/dsh-herdr'",
    "dsh-herdr machine set builder --port 2222 --unset identity",
  ]);
  set.action(async (label: string, o: Partial<AddOptions> & { unset?: string[] }) => {
    const machines = await machinesOf(ctx);
    const was = lookupMachine(machines, label);
    const next: MachineSpec = { ...was, ...specOf(o, ctx.io.env) };
    const fields: Record<string, keyof MachineSpec> = {
      port: "port",
      identity: "identity",
      "known-hosts": "knownHosts",
      command: "command",
    };
    for (const u of o.unset ?? []) {
      const f = fields[u];
      if (f === undefined) throw usage(`--unset ${u}: use port, identity, known-hosts or command`);
      delete next[f];
    }
    if (Object.keys(o).filter((k) => k !== "json").length === 0)
      throw usage(`nothing to change; give --ssh, --port, --identity, --known-hosts, --command or --unset`);
    await setConfigValue(ctx.home, "machines", { ...machines, [label]: next });
    const daemon = await daemonTook(ctx.home);
    if (o.json) return printJson(ctx.io, { label, ...next, daemon });
    ctx.io.out(
      `changed machine ${label} (${machineTarget(next)}); check it with \`dsh-herdr machine check ${label}\`\n`,
    );
    if (daemon === "took")
      ctx.io.err(`the running daemon took it: its link to ${label} is made again with the new entry\n`);
    if (daemon === "not_taken")
      ctx.io.err(
        `the running daemon did not take it (see ${ctx.home}/daemon.log); restart it: dsh-herdr daemon restart\n`,
      );
  });

  const trust = machine
    .command("trust")
    .description(
      "show the machine's host key fingerprint (ssh-keyscan); with --yes add it to the machine's known_hosts",
    )
    .argument("<label>", "its label")
    .option("--yes", "add the key (after comparing the fingerprint with the one the machine shows)");
  jsonOption(trust);
  examples(trust, ["dsh-herdr machine trust builder", "dsh-herdr machine trust builder --yes"]);
  trust.action(async (label: string, o: { yes?: boolean; json?: boolean }) => {
    const m = lookupMachine(await machinesOf(ctx), label);
    const plan = await trustPlan(ctx, label, m);
    const added = !plan.trusted && o.yes === true;
    if (added) addHostKeys(plan);
    if (o.json)
      return printJson(ctx.io, {
        label,
        host: plan.host,
        knownHosts: plan.knownHosts,
        fingerprints: plan.fingerprints,
        trusted: plan.trusted || added,
        added,
      });
    const out = [`host keys of ${plan.host} (machine ${label}):`, ...plan.fingerprints.map((f) => `  ${f}`)];
    if (plan.trusted) out.push(`already in ${plan.knownHosts}: nothing to add`);
    else if (added) out.push(`added ${plan.lines.length} key(s) for ${plan.host} to ${plan.knownHosts}`);
    else
      out.push(
        `not in ${plan.knownHosts}. Compare with the fingerprint that machine shows (ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub there), then add it: dsh-herdr machine trust ${label} --yes`,
      );
    ctx.io.out(out.join("\n") + "\n");
  });

  const list = machine
    .command("list")
    .description("every machine: target, whether its daemon answers over ssh, its version and open tasks");
  jsonOption(list);
  list.action(async (o: { json?: boolean }) => {
    const machines = await machinesOf(ctx);
    const rows = await Promise.all(Object.entries(machines).map(([label, m]) => probe(ctx, label, m)));
    if (o.json) printJson(ctx.io, { machines: rows });
    else ctx.io.out(renderRows(rows));
  });

  const remove = machine
    .command("remove")
    .description("remove a machine from config.json")
    .argument("<label>", "its label");
  jsonOption(remove);
  remove.action(async (label: string, o: { json?: boolean }) => {
    const machines = await machinesOf(ctx);
    lookupMachine(machines, label);
    const next = { ...machines };
    delete next[label];
    await setConfigValue(ctx.home, "machines", next);
    if (o.json) printJson(ctx.io, { label, removed: true });
    else ctx.io.out(`removed machine ${label}\n`);
  });

  const check = machine
    .command("check")
    .description(
      "reach the machine's daemon over ssh (starting it when none runs), then run its doctor there; exit 1 on any FAIL",
    )
    .argument("<label>", "its label");
  jsonOption(check);
  check.action(async (label: string, o: { json?: boolean }) => {
    const m = lookupMachine(await machinesOf(ctx), label);
    const cmd = m.command ?? DEFAULT_REMOTE_COMMAND;
    // Its doctor first: it needs no daemon, and a shell that cannot find the command says dsh-herdr is missing.
    const doctor = await remoteDoctor(ctx, label, m);
    const checks: CheckResult[] = [];
    let version: string | undefined;
    if (doctor.missing !== undefined) {
      checks.push({
        name: "dsh-herdr",
        level: "fail",
        detail: `\`${cmd}\` is not found on ${label} (${doctor.missing})`,
        fix: `install dsh-herdr there (npm install -g <path or git URL of dsh-herdr>; docs/remote.md), or point at it: dsh-herdr machine set ${label} --command /path/to/dsh-herdr`,
      });
    } else {
      try {
        const s = await remoteStatus(ctx, label, m);
        version = s.version;
        const mine = packageVersion();
        checks.push(
          s.version === mine
            ? { name: "dsh-herdr", level: "ok", detail: `dsh-herdr ${s.version} (\`${cmd}\`) on ${label}` }
            : {
                name: "dsh-herdr",
                level: "warn",
                detail: `dsh-herdr ${s.version} on ${label}, ${mine} here`,
                fix: `install the same version there (docs/remote.md)`,
              },
          {
            name: "link",
            level: "ok",
            detail: `daemon ${s.version} (pid ${s.pid}, home ${s.home}) answered over ssh to ${machineTarget(m)}`,
          },
        );
      } catch (e) {
        const err = isDshError(e) ? e : new DshError("INTERNAL", String(e));
        checks.push({
          name: "link",
          level: "fail",
          detail: err.message,
          fix: `run \`${cmd} daemon connect\` there to see why it does not start`,
        });
      }
      // Its own doctor's checks (pi and its version, the default model, its daemon's environment): fixed there.
      for (const c of doctor.checks)
        checks.push(c.level === "ok" || !c.fix ? c : { ...c, fix: `on ${label} (ssh ${m.ssh}): ${c.fix}` });
    }
    const ok = doctor.missing === undefined && doctor.ok && checks.every((c) => c.level !== "fail");
    if (o.json) printJson(ctx.io, { label, target: machineTarget(m), ok, ...(version ? { version } : {}), checks });
    else ctx.io.out(renderChecks(checks));
    ctx.exitCode = ok ? EXIT.ok : EXIT.failed;
  });
}
