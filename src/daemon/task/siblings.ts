// Siblings: two open isolated tasks of one repository whose work conflicts. At each settle that completes (the settle
// hook, settle-checks.ts) the task's work (its branch plus what is uncommitted, without its setup commit)
// is merged in memory (`git merge-tree --write-tree`) with each open sibling's work; a conflict puts a warning naming
// the other task and the paths on both AgentResults, before either is landed, so the person (or the owner) can land
// one and have the other rebase. A sibling already landed is left to landability (its work is then on the base).
import { DshError } from "../../core/errors.js";
import { SIBLING_PREFIX, withSiblingWarning } from "../../core/result/sibling-warning.js";
import { lifecycleOf } from "../../core/lifecycle/task-cycle.js";
import type { AgentResult } from "../../core/types.js";
import { childIdentity, mergeTree, snapshotWork, workWithoutSetup } from "../ports/git-port.js";
import { validateAgentResult } from "./harvest.js";
import type { TaskRecord } from "./record.js";
import type { Runner, TaskPort } from "./runner-types.js";

export { SIBLING_PREFIX } from "../../core/result/sibling-warning.js";
/** At most this many siblings are merged with per settle (the newest first): each costs a snapshot and a merge. */
export const SIBLINGS_MAX = 20;
const SHOWN = 5;

function warningAbout(other: TaskRecord, paths: string[]): string {
  const more = paths.length > SHOWN ? `, +${paths.length - SHOWN} more` : "";
  return `${SIBLING_PREFIX}${other.taskId} (${other.name}) in ${paths.length} path(s): ${paths.slice(0, SHOWN).join(", ")}${more}; land one of the two, then respond to the other to rebase its work onto it`;
}

/** A task's work as one commit (objects only; its worktree and index are not touched), or undefined when unreadable. */
async function workOf(rec: TaskRecord): Promise<string | undefined> {
  const wt = rec.worktree!;
  const author = childIdentity(rec.name, rec.taskId);
  const snap = await snapshotWork(wt.path, author, "dsh-herdr: sibling snapshot");
  try {
    if (!rec.setupCommit) return snap.commit;
    const w = await workWithoutSetup(wt.repo, snap.commit, rec.setupCommit, author, "dsh-herdr: sibling snapshot");
    return w.conflicts.length ? undefined : w.commit;
  } finally {
    await snap.dispose();
  }
}

/** What the check asks of the settling task: its record, the daemon's tasks and log, its journal. */
export type SiblingCheckPort = TaskPort<"rec" | "journal", "log" | "tasks">;
/** What a sibling is told through: its record and result, written on its own chain, and its owner notified. */
type SiblingPort = TaskPort<"rec" | "state" | "result" | "onChain" | "journal" | "notify", "log" | "store">;

/** The task is open: not closed, its cycle not interrupted. */
const isOpen = (r: Pick<Runner, "state">): boolean => lifecycleOf(r.state.phase) === undefined;

/** Open isolated tasks of the same repository, not landed, newest first. */
function siblingsOf(live: SiblingCheckPort): SiblingPort[] {
  const repo = live.rec.worktree!.repo;
  return [...live.ports.tasks()]
    .filter(
      (o) =>
        o !== live &&
        o.rec.worktree?.repo === repo &&
        !o.rec.remote &&
        o.rec.landing?.landedAs === undefined &&
        o.state.phase.name !== "queued" &&
        isOpen(o),
    )
    .sort((a, b) => b.rec.createdAt - a.rec.createdAt)
    .slice(0, SIBLINGS_MAX);
}

/** Warnings with the sibling ones `drop` selects replaced by `add`. */
function replaced(warnings: readonly string[] | undefined, drop: (w: string) => boolean, add: string[]): string[] {
  return [...(warnings ?? []).filter((w) => !(w.startsWith(SIBLING_PREFIX) && drop(w))), ...add];
}

/**
 * Merge the task's work with each open sibling's; the task's sibling warnings are set in its record (the settled
 * harvest after it carries them), each sibling's warning about this task in its record and, when it has a result,
 * in that result too (under its own chain: a settled result is otherwise final). A git problem is a warning.
 */
export async function checkSiblings(live: SiblingCheckPort): Promise<void> {
  const { rec } = live;
  if (!rec.worktree || rec.remote) return;
  const others = siblingsOf(live);
  if (others.length === 0 && !(rec.warnings ?? []).some((w) => w.startsWith(SIBLING_PREFIX))) return;
  const found: { other: SiblingPort; paths: string[] }[] = [];
  const clear: SiblingPort[] = [];
  try {
    const mine = await workOf(rec);
    if (mine === undefined) return;
    for (const other of others) {
      const theirs = await workOf(other.rec).catch(() => undefined);
      if (theirs === undefined) continue;
      const m = await mergeTree(rec.worktree.repo, mine, theirs);
      if (m.clean || m.conflicts.length === 0) clear.push(other);
      else found.push({ other, paths: m.conflicts });
    }
  } catch (e) {
    live.ports.log.warn({ taskId: rec.taskId, err: String(e) }, "sibling conflicts not measured");
    return;
  }
  rec.warnings = replaced(
    rec.warnings,
    () => true,
    found.map((f) => warningAbout(f.other.rec, f.paths)),
  );
  await live.journal({
    type: "siblings",
    cycle: rec.cycle,
    conflicts: found.map((f) => ({ taskId: f.other.rec.taskId, paths: f.paths })),
  });
  for (const f of found) tellSibling(f.other, rec, f.paths);
  for (const o of clear)
    if ((o.rec.warnings ?? []).some((w) => w.startsWith(SIBLING_PREFIX + rec.taskId))) tellSibling(o, rec, []);
}

/**
 * The sibling's warning about `about` set (or dropped, with no paths), in its record and its current result. Its
 * journal records the warning (`siblings{from, warning?}`): the result changed after its harvest, and verify applies
 * the record to the rebuilt result (withSiblingWarning, the same replacement as here).
 */
function tellSibling(other: SiblingPort, about: TaskRecord, paths: string[]): void {
  const warning = paths.length ? warningAbout(about, paths) : undefined;
  other.rec.warnings = withSiblingWarning(other.rec.warnings, about.taskId, warning);
  if (other.rec.warnings.length === 0) delete other.rec.warnings;
  const run = other.onChain(async () => {
    const cur = other.result;
    if (!cur || !isOpen(other)) return;
    const result: AgentResult = { ...cur };
    const warnings = withSiblingWarning(cur.warnings, about.taskId, warning);
    if (warnings.length) result.warnings = warnings;
    else delete result.warnings;
    validateAgentResult(result);
    other.result = result;
    await other.ports.store.saveTask(other.rec, result);
    await other.journal({
      type: "siblings",
      cycle: other.rec.cycle,
      conflicts: paths.length ? [{ taskId: about.taskId, paths }] : [],
      from: about.taskId,
      ...(warning ? { warning } : {}),
    });
    other.notify(result, { settled: false });
  });
  run.catch((e: unknown) =>
    other.ports.log.warn(
      { taskId: other.rec.taskId, err: e instanceof DshError ? e.message : String(e) },
      "sibling warning not written",
    ),
  );
}
