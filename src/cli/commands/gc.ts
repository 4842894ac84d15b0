// gc: remove worktrees and dsh/* branches whose work is captured (src/git/gc.ts decides; dry run unless --yes).
import type { Command } from "commander";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AgentResult } from "../../core/types.js";
import { gc, type Announced, type GcPlanItem, type GcTask } from "../../git/gc.js";
import { loadConfig } from "../../store/config.js";
import type { CliContext } from "../common/context.js";
import { columns, shortenHome } from "../format/text.js";
import { printJson } from "../common/io.js";
import { knownTaskIds, taskDir } from "../common/task-files.js";
import { remoteGc, type RemoteGcRow } from "./remote-panes.js";
import { examples, jsonOption } from "../common/options.js";

/** Where a dry run records the ignored files it named: `gc --yes` deletes no other. */
export function announcedPath(home: string): string {
  return join(home, "gc-dry-run.json");
}

function readAnnounced(home: string): Announced | undefined {
  try {
    return (JSON.parse(readFileSync(announcedPath(home), "utf8")) as { announced?: Announced }).announced;
  } catch {
    return undefined;
  }
}

/** The plan as printed: ignored files summed up, not listed whole. */
function shown(p: GcPlanItem): object {
  if (!p.ignored) return p;
  const { all: _all, ...ignored } = p.ignored;
  return { ...p, ignored };
}

/** Machines that tasks of this home were relayed to (task.json `remote`): their worktrees are there. */
export function relayMachines(home: string): { local: Set<string>; machines: Set<string> } {
  const relayed = new Set<string>();
  const machines = new Set<string>();
  for (const taskId of knownTaskIds(home)) {
    try {
      const rec = JSON.parse(readFileSync(join(taskDir(home, taskId), "task.json"), "utf8")) as {
        remote?: { label?: unknown };
      };
      if (typeof rec.remote?.label === "string") {
        relayed.add(taskId);
        machines.add(rec.remote.label);
      }
    } catch {
      // no readable record: the local gc treats it as before
    }
  }
  return { local: relayed, machines };
}

interface RecordFacts {
  landing?: { baseBranch?: unknown; landedAs?: unknown; workHead?: unknown };
  included?: { copied?: unknown; linked?: unknown };
}

function readRecord(home: string, taskId: string): RecordFacts | undefined {
  try {
    return JSON.parse(readFileSync(join(taskDir(home, taskId), "task.json"), "utf8")) as RecordFacts;
  } catch {
    return undefined;
  }
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);

/** task.json's `included`: what --include copied and linked into the worktree (src/daemon/task/workdir-setup.ts). */
function recordedIncluded(rec: RecordFacts | undefined): GcTask["included"] | undefined {
  const i = rec?.included;
  if (i === undefined || typeof i !== "object" || i === null) return undefined;
  return { copied: strings(i.copied), linked: strings(i.linked) };
}

/** task.json's `landing` once `land` landed the task (src/daemon/methods/land-methods.ts keeps it in the record). */
function recordedLanding(rec: RecordFacts | undefined): GcTask["landing"] | undefined {
  try {
    const l = rec?.landing;
    if (typeof l?.baseBranch !== "string" || typeof l.landedAs !== "string") return undefined;
    return {
      baseBranch: l.baseBranch,
      landedAs: l.landedAs,
      ...(typeof l.workHead === "string" ? { workHead: l.workHead } : {}),
    };
  } catch {
    return undefined;
  }
}

export function gcTasks(home: string, relayed: Set<string> = new Set()): GcTask[] {
  // A relayed task's worktree path is the other machine's: never judged (or removed) here.
  return knownTaskIds(home)
    .filter((taskId) => !relayed.has(taskId))
    .map((taskId) => {
      const file = join(taskDir(home, taskId), "result.json");
      if (!existsSync(file)) return { taskId, open: true };
      const r = JSON.parse(readFileSync(file, "utf8")) as AgentResult;
      // Open as long as `list` shows it (anything not closed, failed and interrupted ones included): done closes it.
      const t: GcTask = { taskId, open: r.status !== "closed" };
      if (r.worktree) t.worktree = r.worktree;
      if (r.diff)
        t.diff = { baselineHead: r.diff.baselineHead, patchPath: r.diff.patchPath, truncated: r.diff.truncated };
      // The landing from result.json, else from task.json (a result rebuilt since, e.g. at close, may not carry it).
      const rec = readRecord(home, taskId);
      const landing = r.landing?.landedAs !== undefined ? r.landing : recordedLanding(rec);
      if (landing) t.landing = landing;
      const included = recordedIncluded(rec);
      if (included) t.included = included;
      return t;
    });
}

export function registerGcCommand(program: Command, ctx: CliContext): void {
  const cmd = program
    .command("gc")
    .description("remove worktrees and dsh/* branches of finished tasks whose work is captured (dry run unless --yes)")
    .option("--yes", "remove what the plan says (otherwise only print it)");
  jsonOption(cmd);
  examples(cmd, ["dsh-herdr gc", "dsh-herdr gc --yes"]);
  cmd.action(async (o: { yes?: boolean; json?: boolean }) => {
    const cfg = await loadConfig(ctx.home, ctx.io.env);
    const announced = o.yes === true ? readAnnounced(ctx.home) : undefined;
    const relay = relayMachines(ctx.home);
    const plan = await gc({
      tasks: gcTasks(ctx.home, relay.local),
      yes: o.yes === true,
      capBytes: cfg.patchCapBytes,
      ...(announced ? { announced } : {}),
    });
    if (o.yes !== true && existsSync(ctx.home)) {
      const named: Announced = {};
      for (const p of plan) if (p.action === "remove" && p.path !== null && p.ignored) named[p.path] = p.ignored.all;
      writeFileSync(
        announcedPath(ctx.home),
        JSON.stringify({ at: new Date().toISOString(), announced: named }) + "\n",
        { mode: 0o600 },
      );
    }
    // Tasks relayed to other machines: each machine's own gc, over ssh.
    const remote: RemoteGcRow[] = [];
    for (const label of [...relay.machines].sort()) remote.push(...(await remoteGc(ctx, label, o.yes === true)));
    if (o.json) return printJson(ctx.io, { dryRun: o.yes !== true, plan: [...plan.map(shown), ...remote] });
    if (plan.length === 0 && remote.length === 0)
      return ctx.io.out("nothing to collect: no dsh/* worktrees or branches\n");
    const rows = plan.map((p) => [
      o.yes && p.action === "remove" ? (p.done ? "removed" : "FAILED") : p.action,
      p.taskId,
      "",
      p.path ? shortenHome(p.path) : p.branch,
      p.error ?? p.reason,
    ]);
    for (const p of remote)
      rows.push([
        o.yes && p.action === "remove" ? (p.done ? "removed" : "FAILED") : String(p.action ?? ""),
        String(p.taskId ?? ""),
        p.machine,
        String(p.path ?? p.branch ?? ""),
        String(p.error ?? p.reason ?? ""),
      ]);
    // The MACHINE column only when some task ran elsewhere.
    const table = [["ACTION", "TASK", "MACHINE", "WORKTREE/BRANCH", "WHY"], ...rows].map((r) =>
      remote.length > 0 ? r : r.filter((_, i) => i !== 2),
    );
    ctx.io.out(columns(table).join("\n") + "\n");
    if (!o.yes && [...plan, ...remote].some((p) => p.action === "remove"))
      ctx.io.out("dry run: run `dsh-herdr gc --yes` to remove\n");
  });
}
