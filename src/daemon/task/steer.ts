// Steering: `respond` to a task whose cycle is in flight (core's respondAs says so). The message is durable first
// (`steer.<cycle>.<n>.md`, then the machine's `steered` record), then pushed to the child extension, which hands it
// to pi as a steer (pi adds it to the running turn before its next model call) and answers `steer_taken`. A restarted
// daemon pushes a steer the journal shows pending again; the child knows what it took, so pi never gets it twice.
// A steer pi never took when the cycle ends is missed (journaled after the settle): the person who sent it learns it
// from their respond, whose message then becomes the follow-up of the settled cycle (a new cycle) when it settled
// completed or blocked; nobody waiting, the settled result carries a warning instead. The machine's events (`steer`,
// `steer_taken`) are returned to the runner, which feeds them (TaskRunner.steer, childEvent).
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { DshError } from "../../core/errors.js";
import { crashPoint } from "../ports/crash-hook.js";
import { cycleOf, respondAs, type CycleEvent } from "../../core/lifecycle/task-cycle.js";
import { writeAtomic } from "../../store/fsio.js";
import type { Live } from "./live.js";
import type { ChildEvent, Runner, SteerReply, TaskPort } from "./runner-types.js";

export type { SteerReply } from "./runner-types.js";

/** How long a respond waits for pi to take its steer before answering that it is pending. */
const STEER_WAIT_MS = 5000;

export function steerPath(taskDir: string, cycle: number, n: number): string {
  return join(taskDir, `steer.${cycle}.${n}.md`);
}

type Fate = "taken" | "missed";

/** The task's steering bookkeeping: steer number → the respond waiting for its fate, and the numbers handed out. */
function steering(live: Pick<Live, "steering">): NonNullable<Live["steering"]> {
  live.steering ??= { reserved: 0, waiters: new Map() };
  return live.steering;
}

/** What a steer asks of its task: its state, its steering bookkeeping, and respond for a late one. */
export type SteerPort = TaskPort<
  "rec" | "state" | "result" | "steering" | "effectsDone" | "respond",
  "clock" | "store"
>;

/** A steer numbered and on disk, for the runner to feed to the machine (`event`), with the fate pi will give it. */
export interface WrittenSteer {
  cycle: number;
  n: number;
  file: string;
  event: CycleEvent;
  fate: Promise<Fate>;
  /** The cycle was queued for a slot: no child to take it yet. */
  queued: boolean;
}

/**
 * The first half of a steer of the cycle in flight with `message`: its text durable and its number handed out.
 * `again`: the cycle moved on meanwhile and the next one is in flight too (steer that one); a reply: it moved on and
 * the message went as a follow-up (or is refused).
 */
export async function writeSteer(
  live: SteerPort,
  message: string,
): Promise<WrittenSteer | { reply: SteerReply } | "again"> {
  const { rec } = live;
  const phase = live.state.phase;
  if (phase.name === "closed") throw new DshError("BAD_STATE", `task ${rec.taskId} is closed`);
  const cycle = phase.cycle;
  // Handed out before any await: two responds at once get two numbers (the machine learns it with the event).
  const n = Math.max(live.state.lastSteer ?? 0, steering(live).reserved) + 1;
  steering(live).reserved = n;
  const file = steerPath(live.ports.store.taskPaths(rec.taskId).dir, cycle, n);
  // The text is on disk before the record that names it, and the record before the push: a crash anywhere leaves a
  // steer that is pushed (again) or one that never was, never one the journal cannot account for.
  await writeAtomic(file, message);
  if (cycleOf(live.state.phase) !== cycle) {
    // Another cycle meanwhile (this one settled and a follow-up started): the text was named for the old one.
    await rm(file, { force: true });
    if (respondAs(live.state.phase, statusOf(live)) === "steer") return "again";
    return { reply: await asFollowUp(live, message, cycle) };
  }
  const fate = new Promise<Fate>((resolve) => steering(live).waiters.set(n, resolve));
  const event: CycleEvent = { type: "steer", n, bytes: Buffer.byteLength(message) };
  return { cycle, n, file, event, fate, queued: phase.name === "queued" };
}

/**
 * The second half, once the runner fed the steer's event: `accepted` when the machine took it (read as the phase
 * moved, synchronously). Waits a while for pi to take it; a steer the cycle ended before becomes a follow-up.
 */
export async function steerFate(
  live: SteerPort,
  s: WrittenSteer,
  accepted: boolean,
  message: string,
): Promise<SteerReply> {
  const { cycle, n } = s;
  if (!accepted) {
    // The cycle settled while the text was written: the machine took no steer. It is a follow-up now, or nothing.
    forget(live, n);
    await rm(s.file, { force: true });
    return asFollowUp(live, message, cycle);
  }
  // A cycle still queued for a slot has no child to take it yet: no point waiting.
  const waited = s.queued ? undefined : await within(live, s.fate, STEER_WAIT_MS);
  if (waited === "taken") return { cycle, steered: true };
  if (waited === undefined) {
    // Kept for the run: pushed when the child is there and taken when its run starts (a miss is a warning then).
    forget(live, n);
    return { cycle, steered: true, pending: true };
  }
  // Missed: the cycle ended before pi took it. Its settle (and harvest) runs on; the message is the next cycle's.
  await live.effectsDone;
  return asFollowUp(live, message, cycle);
}

/** The status the task shows now: the live result's, else the record's. */
const statusOf = (live: Pick<Live, "result" | "rec">): string => live.result?.status ?? live.rec.status;

async function asFollowUp(
  live: Pick<Runner, "rec" | "state" | "result" | "respond">,
  message: string,
  cycle: number,
): Promise<SteerReply> {
  const status = statusOf(live);
  if (respondAs(live.state.phase, status) !== "follow_up")
    throw new DshError(
      "BAD_STATE",
      `task ${live.rec.taskId}'s cycle ${cycle} ended (${status}) before the message reached it, so it was not delivered; read the result (dsh-herdr show ${live.rec.taskId}) and spawn a new task`,
    );
  const r = await live.respond(message);
  return { cycle: r.cycle, late: true, ...(r.queued ? { queued: true } : {}) };
}

function forget(live: Pick<Live, "steering">, n: number): void {
  live.steering?.waiters.delete(n);
}

/** `p`'s value, or undefined after `ms` on the task's clock. */
function within<T>(live: TaskPort<never, "clock">, p: Promise<T>, ms: number): Promise<T | undefined> {
  const { clock } = live.ports;
  return new Promise((resolve) => {
    const t = clock.setTimer(ms, () => resolve(undefined));
    void p.then((v) => {
      clock.clearTimer(t);
      resolve(v);
    });
  });
}

/** The machine's push_steer effect: the steer's text to the connected child (it answers steer_taken). */
export async function pushSteer(
  live: TaskPort<"child" | "rec", "log" | "store">,
  cycle: number,
  n: number,
): Promise<void> {
  const child = live.child;
  if (!child) return; // its hello pushes the pending steers again
  const text = await readFile(steerPath(live.ports.store.taskPaths(live.rec.taskId).dir, cycle, n), "utf8").catch(
    () => undefined,
  );
  if (text === undefined) {
    live.ports.log.warn({ taskId: live.rec.taskId, cycle, n }, "steer text missing; not pushed");
    return;
  }
  if (live.child === child) child.push("child.steer", { cycle, n, text });
}

/** The machine's steers_missed effect (before the settled harvest): tell the waiting respond, else warn in the result. */
export function steersMissed(live: Live, cycle: number, ns: number[]): void {
  for (const n of ns) {
    const waiting = live.steering?.waiters.get(n);
    if (waiting) {
      forget(live, n);
      waiting("missed");
      continue;
    }
    const note = `a message sent with respond (steer.${cycle}.${n}.md in the task dir) did not reach the child: cycle ${cycle} ended before pi took it; respond again to send it as a follow-up`;
    live.rec.warnings = [...(live.rec.warnings ?? []), note];
  }
}

/** The child's answer to a pushed steer: taken into pi's running turn (an event), or too late for its run (the settle follows). */
export function steerAnswered(live: TaskPort<"rec", "log">, ev: ChildEvent): CycleEvent | undefined {
  if (ev.cycle === undefined || ev.n === undefined) return undefined;
  if (ev.type === "steer_taken") {
    crashPoint("steer_answer"); // crash tests: pi has it, the journal does not say so yet
    return { type: "steer_taken", cycle: ev.cycle, n: ev.n };
  }
  live.ports.log.debug({ taskId: live.rec.taskId, cycle: ev.cycle, n: ev.n }, "steer came after the run ended");
  return undefined;
}

/** Once the machine recorded a steer taken: the respond waiting for it answers. */
export function steerTaken(live: Pick<Live, "steering">, n: number): void {
  const waiting = live.steering?.waiters.get(n);
  if (waiting) {
    forget(live, n);
    waiting("taken");
  }
}
