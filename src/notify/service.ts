// Notifications (issue 26): every settled cycle (and a task that turns blocked) becomes one delivery per configured
// webhook and command, queued in the home's notify log (log.ts) before it is sent, then sent in the background with
// retries and backoff for 24 h until a 2xx answer, at most once after it. Nothing here holds up a settle, the owner's
// delivery or the socket: the status listener only queues, and each delivery runs on its own timers.
import { DELIVERY_TTL_MS } from "../core/crew/crew-delivery.js";
import {
  isNotifyStatus,
  notifyBody,
  wants,
  type CommandTarget,
  type NotifyBody,
  type NotifyConfig,
  type WebhookTarget,
} from "../core/notify.js";
import type { AgentResult } from "../core/types.js";
import type { MakeDurable } from "../store/outbox.js";
import { NotifyLog, type NotifyRecord, type Pending } from "./log.js";
import { describeAnswer, postWebhook, runCommand, targetKey, webhookLabel, type Answer } from "./send.js";

export interface NotifyLogger {
  info(o: object, msg: string): void;
  warn(o: object, msg: string): void;
  error(o: object, msg: string): void;
}

/** The status source (the supervisor): each task's cycle and its result chain, read structurally. */
export interface NotifySource {
  onStatus(
    fn: (
      live: { rec: { cycle: number }; chain: Promise<void> },
      result: AgentResult,
      info: { settled: boolean; recovered?: true },
    ) => void,
  ): () => void;
}

export interface NotifyServiceOptions {
  home: string;
  log: NotifyLogger;
  /** The current config's `notify` (config.json is reloaded while the daemon runs). */
  config(): NotifyConfig | undefined;
  /** The store's commit log: the notify log's records are durable with (and after) the settle records before them. */
  durable?: MakeDurable;
  userAgent: string;
  now?(): number;
  /** Retry backoff: the first wait, doubled per failure up to maxDelayMs. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  ttlMs?: number;
  /** Attempts in flight at once, across targets. */
  concurrency?: number;
}

type Target = { key: string; kind: "webhook"; t: WebhookTarget } | { key: string; kind: "command"; t: CommandTarget };

interface Job extends Pending {
  attempt: number;
  timer?: NodeJS.Timeout;
  running?: boolean;
}

export class NotifyService {
  private readonly store: NotifyLog;
  private readonly now: () => number;
  private readonly ttlMs: number;
  private readonly jobs = new Map<string, Job>();
  private known = new Set<string>();
  private since = new Map<string, number>();
  private stopped = false;
  /** Aborted at stop: a command target still running is ended with its group (the next daemon runs it again). */
  private readonly stopping = new AbortController();
  private inFlight = 0;
  private readonly waiting: Job[] = [];
  private started = false;
  /** Attempts made and how they went (tests and `daemon status` read them). */
  readonly stats = { attempts: 0, delivered: 0, expired: 0 };

  constructor(private readonly opts: NotifyServiceOptions) {
    this.store = new NotifyLog(opts.home, opts.durable);
    this.now = opts.now ?? Date.now;
    this.ttlMs = opts.ttlMs ?? DELIVERY_TTL_MS;
  }

  /** Read the notify log back and send what a previous daemon left unsent. */
  async start(): Promise<void> {
    let loaded: Awaited<ReturnType<NotifyLog["load"]>>;
    try {
      loaded = await this.store.load(this.now(), 2 * this.ttlMs);
    } catch (e) {
      // The daemon serves on; notifications stay off until the file is fixed (the log says which and why).
      this.opts.log.error({ file: this.store.path, err: String(e) }, "notify log unreadable; notifications are off");
      return;
    }
    const { pending, known, since } = loaded;
    this.known = known;
    this.since = since;
    this.started = true;
    await this.noteTargets();
    for (const p of pending) this.schedule({ ...p, attempt: 0 }, 0);
    if (pending.length > 0) this.opts.log.info({ pending: pending.length }, "notifications left unsent resumed");
  }

  stop(): void {
    this.stopped = true;
    this.stopping.abort();
    for (const j of this.jobs.values()) clearTimeout(j.timer);
  }

  /** Every record queued so far is written (tests; daemon stop). */
  idle(): Promise<void> {
    return this.store.idle();
  }

  /** Queue a notification for every settled cycle, and for a status that turns blocked while a cycle runs. */
  watch(source: NotifySource): () => void {
    return source.onStatus((live, result, info) => {
      if (this.stopped || !this.started || !isNotifyStatus(result.status)) return;
      if (!info.settled && result.status !== "blocked") return;
      const c = this.opts.config();
      if (!c?.webhooks?.length && !c?.commands?.length) return; // nothing configured: nothing to queue
      const at = result.timing.settledAt ?? this.now();
      const body = notifyBody(result, live.rec.cycle, at);
      if (!body) return;
      // Sent once the result it announces is recorded (a receiver that reads result.json at once finds it).
      const recorded = live.chain.catch(() => undefined);
      void this.enqueue(body, at, info.recovered === true, recorded).catch((e: unknown) =>
        this.opts.log.error({ deliveryId: body.deliveryId, err: String(e) }, "notification not queued"),
      );
    });
  }

  private targets(): Target[] {
    const c = this.opts.config();
    return [
      ...(c?.webhooks ?? []).map(
        (t): Target => ({ key: targetKey({ kind: "webhook", url: t.url }), kind: "webhook", t }),
      ),
      ...(c?.commands ?? []).map(
        (t): Target => ({ key: targetKey({ kind: "command", command: t.command }), kind: "command", t }),
      ),
    ];
  }

  /** Record when each configured target was first seen (a restart does not send old cycles to a new target). */
  private async noteTargets(): Promise<void> {
    const fresh: NotifyRecord[] = [];
    for (const t of this.targets()) {
      if (this.since.has(t.key)) continue;
      const ts = this.now();
      this.since.set(t.key, ts);
      fresh.push({ state: "target", target: t.key, ts });
    }
    await this.store.append(fresh);
  }

  private async enqueue(body: NotifyBody, at: number, recovered: boolean, recorded: Promise<unknown>): Promise<void> {
    if (this.now() - at > this.ttlMs) return; // older than the 24 h a delivery is tried for
    await this.noteTargets();
    const jobs: Job[] = [];
    for (const t of this.targets()) {
      if (!wants(t.t, body.status)) continue;
      const id = `${body.deliveryId}@${t.key}`;
      if (this.known.has(id)) continue; // one delivery per id, ever
      // A cycle re-announced by a restart: only a record lost to a crash is queued again, and only for targets that
      // were configured when it settled.
      if (recovered && (this.since.get(t.key) ?? Infinity) > at) continue;
      this.known.add(id);
      const label = t.kind === "webhook" ? webhookLabel(t.t.url) : "command";
      jobs.push({ id, ts: at, target: t.key, kind: t.kind, label, body, attempt: 0 });
    }
    if (jobs.length === 0) return;
    try {
      await this.store.append(
        jobs.map(({ id, ts, target, kind, label }) => ({ state: "queued", id, ts, target, kind, label, body })),
      );
    } catch (e) {
      for (const j of jobs) this.known.delete(j.id); // not on record: a later announcement may queue it again
      throw e;
    }
    await recorded;
    for (const j of jobs) this.schedule(j, 0);
  }

  private schedule(job: Job, delayMs: number): void {
    if (this.stopped) return;
    this.jobs.set(job.id, job);
    clearTimeout(job.timer);
    job.timer = setTimeout(() => this.ready(job), delayMs);
    job.timer.unref();
  }

  private ready(job: Job): void {
    if (this.stopped) return;
    if (this.inFlight >= (this.opts.concurrency ?? 8)) {
      this.waiting.push(job);
      return;
    }
    this.inFlight++;
    job.running = true;
    void this.attempt(job).finally(() => {
      job.running = false;
      this.inFlight--;
      const next = this.waiting.shift();
      if (next) this.ready(next);
    });
  }

  private async attempt(job: Job): Promise<void> {
    const target = this.targets().find((t) => t.key === job.target);
    if (!target) {
      this.jobs.delete(job.id);
      this.opts.log.warn(
        { deliveryId: job.body.deliveryId, target: job.label },
        "notification dropped: its target left config.json",
      );
      await this.finish(job, "dropped");
      return;
    }
    this.stats.attempts++;
    job.attempt++;
    const answer: Answer =
      target.kind === "webhook"
        ? await postWebhook(target.t, job.body, this.opts.userAgent)
        : await runCommand(target.t, job.body, process.env, this.stopping.signal);
    if (this.stopped && !answer.ok) return; // the next daemon tries again
    const where = { deliveryId: job.body.deliveryId, taskId: job.body.taskId, target: job.label, attempt: job.attempt };
    // A command runs at most once whatever it exits with (its side effects must not repeat); its output is logged.
    if (answer.ok || target.kind === "command") {
      this.jobs.delete(job.id);
      this.stats.delivered++;
      const line = describeAnswer(answer);
      if (target.kind === "command")
        (answer.ok ? this.opts.log.info : this.opts.log.warn).call(
          this.opts.log,
          { ...where, answer: line, ...(answer.text ? { output: answer.text } : {}) },
          "notify command ran",
        );
      else this.opts.log.info({ ...where, answer: line }, "notification delivered");
      await this.finish(job, "done", line);
      return;
    }
    const delay = Math.min(this.opts.maxDelayMs ?? 300_000, (this.opts.baseDelayMs ?? 1000) * 2 ** (job.attempt - 1));
    if (this.now() + delay - job.ts > this.ttlMs) {
      this.jobs.delete(job.id);
      this.stats.expired++;
      this.opts.log.warn(
        { ...where, answer: describeAnswer(answer) },
        "notification given up (not delivered within 24 h)",
      );
      await this.finish(job, "expired", describeAnswer(answer));
      return;
    }
    this.opts.log.warn(
      { ...where, answer: describeAnswer(answer), retryInMs: delay },
      "notification not delivered; retrying",
    );
    this.schedule(job, delay);
  }

  private async finish(job: Job, state: "done" | "expired" | "dropped", answer?: string): Promise<void> {
    try {
      await this.store.append([{ state, id: job.id, ts: this.now(), ...(answer ? { answer } : {}) }]);
    } catch (e) {
      // Not on record: after a restart it is sent again (the id lets the receiver drop the repeat).
      this.opts.log.error({ deliveryId: job.body.deliveryId, err: String(e) }, "notification's outcome not recorded");
    }
  }
}
