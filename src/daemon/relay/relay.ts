// The relay: a task spawned with `machine: LABEL` (a label under config.json `machines`) runs on that machine's own
// daemon, reached over its MachineLink (one ssh connection per machine, every task of that machine multiplexed on
// it). This daemon is a client there: it calls the remote `task.spawn` (as the CLI, so the remote owes no owner
// delivery) as an idempotent request, follows the machine's tasks (`task.follow`: every status pushed with its cycle
// and whether it settled it, `task.fetch` for results too large for a frame), checks everything it is told (a
// remote is untrusted input), and keeps a local record (task dir, task.json with `remote`, result.json, a copy of
// diff.patch) so the local owner gets one AgentResult and one delivery per settled cycle, as if local.
//
// Remote tasks go through the same lifecycle machine (src/core/lifecycle/task-cycle.ts) as local ones, through
// relay-machine.ts: the relay feeds it the remote's events (remote_started when the remote took a cycle,
// remote_settled with the remote's verdict, close, restored at start-up) and this daemon's own verdicts on a cycle
// (remote_invalid: the machine's word refused; remote_lost: the task gone there; launch_failed: a request the
// machine refused), and carries out the effects that mean something here: the settle record first (once per
// cycle), then the settled result recorded and delivered. The runner's machine is the one writer of the phase.
// Timers, slots and the child are the remote daemon's own. What the relay keeps per task (a settle under way, a
// request waiting for its answer) lives on the task's runner; per machine (the links) here.
//
// This file owns the links (one per machine, made on first use); the parts live beside it: relay-types.ts (the
// shapes it needs of the daemon), relay-spawn.ts, relay-follow.ts (status, settle, link up/down, REMOTE_INVALID and
// REMOTE_LOST), relay-requests.ts (request ids, the reconcile), relay-fetch.ts (paged reads), remote-check.ts (what
// a remote result must be), relay-commands.ts (respond, abort, close), relay-recover.ts (start-up) and
// relay-machine.ts (stepping the machine).
import { DshError } from "../../core/errors.js";
import type { AgentResult } from "../../core/types.js";
import { lifecycleOf } from "../../core/lifecycle/task-cycle.js";
import type { MachineSpec } from "../../core/machines.js";
import { MachineLink } from "../../link/link.js";
import type { CapLimits } from "../../core/budget.js";
import { adoptFollowUp, followUpUnanswered, relayAbort, relayClose, relayRespond } from "./relay-commands.js";
import { RemoteFollow } from "./relay-follow.js";
import { relayReattach, relayRecover } from "./relay-recover.js";
import { RelayRequests, type RespondAnswer, type SpawnAnswer } from "./relay-requests.js";
import type { Result } from "../../protocol/methods.js";
import { adoptSpawned, relaySpawn, spawnRefused } from "./relay-spawn.js";
import type {
  RelayContext,
  RelayHost,
  RelayLive,
  RelayOptions,
  RemoteRecord,
  RemoteSpawnParams,
} from "./relay-types.js";

export type { RelayHost, RelayLive, RelayOptions, RemoteRecord, RemoteSpawnParams } from "./relay-types.js";

export class Relay {
  private readonly links = new Map<string, MachineLink>();
  /** The config.json entry each link was made with (JSON): a changed entry means a new link. */
  private readonly linkSpecs = new Map<string, string>();
  private readonly ctx: RelayContext;
  private readonly followSide: RemoteFollow;
  private readonly requests: RelayRequests;
  private stopped = false;

  constructor(
    private readonly sup: RelayHost,
    private readonly opts: RelayOptions,
  ) {
    const self = this;
    this.ctx = {
      sup,
      get stopped() {
        return self.stopped;
      },
      linkOf: (label) => this.links.get(label),
      ready: (label) => this.ready(label),
    };
    this.followSide = new RemoteFollow(this.ctx);
    this.requests = new RelayRequests(this.ctx, {
      answered: (live, req, a) =>
        req.method === "task.spawn"
          ? adoptSpawned(this.ctx, this.followSide, live, req, a as SpawnAnswer)
          : adoptFollowUp(this.ctx, this.followSide, live, req, a as RespondAnswer),
      refused: async (live, req, err, waited) => {
        sup.deps.log.warn(
          { taskId: live.rec.taskId, method: req.method, requestId: req.requestId, code: err.code, err: err.message },
          "the machine refused a relayed request",
        );
        if (req.method === "task.spawn") await spawnRefused(this.ctx, this.followSide, live, err, waited);
        // A follow-up whose cycle was started here meanwhile: that cycle ends with the machine's refusal (its start
        // failed there), decided by the machine as any settle.
        else if (live.state.phase.name === "running" && live.state.phase.cycle === req.cycle)
          await this.followSide.settleHere(live, { type: "launch_failed", code: err.code, message: err.message });
      },
      unanswered: async (live, req) => {
        if (req.method === "task.respond") await followUpUnanswered(this.ctx, live, req);
      },
    });
  }

  private machines(): Record<string, MachineSpec> {
    return this.sup.deps.config().machines ?? {};
  }

  /** `machine` names a configured machine (else it is Herdr's label, or unknown). */
  knows(label: string): boolean {
    return Object.hasOwn(this.machines(), label);
  }

  /** The task is relayed to another machine. */
  owns(live: RelayLive): boolean {
    return live.rec.remote !== undefined;
  }

  /** The machine's link, once something used it (tests kill its ssh or read the remote daemon's pid). */
  linkOf(label: string): MachineLink | undefined {
    return this.links.get(label);
  }

  private link(label: string): MachineLink {
    let link = this.links.get(label);
    if (link) return link;
    const machine = this.machines()[label];
    if (!machine)
      throw new DshError(
        "MACHINE_UNKNOWN",
        `no machine "${label}" in config.json; add it with \`dsh-herdr machine add ${label} --ssh USER@HOST\``,
      );
    link = new MachineLink({
      label,
      machine,
      version: this.opts.version,
      ...(this.opts.env ? { env: this.opts.env } : {}),
      ...(this.opts.backoff ? { backoff: this.opts.backoff } : {}),
      ...(this.opts.forwardDir !== undefined ? { forwardDir: this.opts.forwardDir } : {}),
    });
    this.links.set(label, link);
    this.linkSpecs.set(label, JSON.stringify(machine));
    const timeout = this.opts.reattachTimeoutMs ?? 20_000;
    link.on("up", (u) => {
      const log = { label, transport: u.transport, remotePid: u.hello.pid };
      if (u.forwardError)
        this.sup.deps.log.warn(
          { ...log, err: u.forwardError.message },
          "link forward failed; frames go through daemon connect",
        );
      else this.sup.deps.log.info(log, "link up");
      // Follow the machine's tasks and read each open one again; send every request still waiting for its answer.
      this.quietly(this.followSide.onUp(label, timeout), label, "link up");
      this.requests.reconcile(label);
    });
    link.on("down", (d) => this.quietly(this.followSide.onDown(label, d), label, "link down"));
    link.on("push", (method, params) => {
      if (method === "task.followed") this.quietly(this.followSide.onFollowed(label, params), label, method);
    });
    link.start();
    return link;
  }

  /**
   * A link event's work, which nobody awaits: its failure (a store error while recording a verdict) is logged, not
   * left unhandled (which would end the daemon).
   */
  private quietly(work: Promise<void>, label: string, what: string): void {
    work.catch((e: unknown) =>
      this.sup.deps.log.error({ label, err: String(e) }, `relayed tasks: handling ${what} failed`),
    );
  }

  /**
   * config.json was reloaded (`machine set`): a link whose machine entry changed or went is closed; one with open
   * tasks is made again with the new entry (its "up" reads their results again and sends their pending requests);
   * the others on next use.
   */
  async machinesChanged(): Promise<void> {
    if (this.stopped) return;
    for (const [label, link] of [...this.links]) {
      const now = this.machines()[label];
      if (now !== undefined && JSON.stringify(now) === this.linkSpecs.get(label)) continue;
      this.links.delete(label);
      this.linkSpecs.delete(label);
      await link.close();
      const open = this.followSide.remoteLives(label).some((l) => lifecycleOf(l.state.phase) === undefined);
      if (now !== undefined && open && !this.stopped && !this.links.has(label)) this.link(label);
    }
  }

  /** The link up now, or MACHINE_UNREACHABLE with ssh's line (waits for an attempt under way). */
  private async ready(label: string): Promise<MachineLink> {
    const link = this.link(label);
    if (link.state === "up") return link;
    if (link.state === "down" && link.error) throw link.error;
    await link.ready();
    return link;
  }

  spawn(p: RemoteSpawnParams, owner: string): Promise<Result<"task.spawn">> {
    return relaySpawn(this.ctx, this.requests, p, owner);
  }

  respond(live: RelayLive, message: string, caps?: CapLimits): Promise<{ cycle: number; queued: boolean }> {
    return relayRespond(this.ctx, this.requests, live, message, caps);
  }

  abort(live: RelayLive): Promise<boolean> {
    return relayAbort(this.ctx, live);
  }

  close(live: RelayLive, closePane: boolean): Promise<AgentResult> {
    return relayClose(this.ctx, live, closePane);
  }

  /** A remote task found at start-up (src/daemon/recover/recover.ts); see relay-recover.ts. */
  recover(
    rec: RemoteRecord,
    journal: Parameters<typeof relayRecover>[4],
    events: Parameters<typeof relayRecover>[5] = [],
  ): Promise<void> {
    return relayRecover(this.ctx, this.requests, this.followSide, rec, journal, events);
  }

  /**
   * After every remote task is registered: reattach to each machine with open ones, in the background (start-up
   * never waits on a machine; the socket serves at once). Resolves at once.
   */
  async reattach(): Promise<void> {
    relayReattach(this.ctx, this.followSide, {
      knows: (label) => this.knows(label),
      link: (label) => this.link(label),
      since: this.ctx.sup.deps.clock.now(),
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.links.values()].map((l) => l.close()));
    this.links.clear();
    this.linkSpecs.clear();
  }
}
