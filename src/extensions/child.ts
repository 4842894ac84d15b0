// The child extension, loaded into every supervised pi with `-ne -e <this file>`: the control channel between
// the child and the daemon for every runtime. It says hello with its task id and token, runs the prompts the
// daemon pushes (a new cycle each), reports lifecycle events, and provides crew_report.
// It imports only types from pi, so it loads on pi 0.73.1 and 1.x alike.
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { existsSync } from "node:fs";
import { dirname } from "node:path";
import { connect, type DaemonClient, type RequestArgs } from "../client/index.js";
import type { Params } from "../protocol/methods.js";
import {
  errorEndingOutlook,
  isRetryableError073,
  piLineOfEntry,
  piLineOfVersion,
  type PiLine,
} from "../core/session/retry-outlook.js";
import { CycleGuard, FINALIZE_PROMPT, checkCrewReport, judgeCycle, type CrewReport } from "../core/crew/crew-cycle.js";
import { readPiVersion, readRetrySettings } from "./child-settings.js";
import { CREW_REPORT_DESCRIPTION, CREW_REPORT_PARAMETERS, resultMdFor, writeResultMd } from "./child-report.js";

/** What a child says to the daemon: its events and its report (schema/protocol/child.*.json). */
type ChildMethod = "child.event" | "child.report";
type ChildCall = { [M in ChildMethod]: { method: M; params: Params<M> } }[ChildMethod];

interface Env {
  socket?: string;
  taskId?: string;
  token?: string;
  resultPath?: string;
}

export default function childExtension(pi: ExtensionAPI): void {
  const env: Env = {
    socket: process.env.DSH_HERDR_SOCKET,
    taskId: process.env.DSH_HERDR_TASK_ID,
    token: process.env.DSH_HERDR_TASK_TOKEN,
    resultPath: process.env.DSH_HERDR_RESULT_PATH,
  };
  let client: DaemonClient | undefined;
  let ctxRef: ExtensionContext | undefined;
  let cycle = 0;
  let ranCycle = 0;
  let shuttingDown = false;
  const supervised = Boolean(env.socket && env.taskId && env.token);
  const guard = new CycleGuard();
  /** The last valid crew_report per tool call; acceptance at agent_end decides which (if any) counts. */
  const reports = new Map<string, CrewReport>();
  /** Events raised while disconnected wait here, in order. */
  const backlog: ChildCall[] = [];

  const send = <M extends ChildMethod>(method: M, params: Params<M>) => {
    if (client && !client.closed) {
      client.request(method, ...([params, { timeoutMs: 10_000 }] as RequestArgs<M>)).catch(() => undefined);
    } else if (backlog.length < 100) {
      backlog.push({ method, params } as ChildCall);
    }
  };
  /** How the last cycle ended, kept so a daemon that pushes that cycle's prompt again learns the outcome again. */
  let lastEnd: { cycle: number; msgs: ChildCall[] } | undefined;
  /** The newest cycle whose final ending went out: a steer for it comes too late for its run. */
  let endedCycle = 0;
  const sendEnd = <M extends ChildMethod>(method: M, params: Params<M>) => {
    if (lastEnd?.cycle !== cycle) lastEnd = { cycle, msgs: [] };
    lastEnd.msgs.push({ method, params } as ChildCall);
    send(method, params);
    if (!("willRetry" in params && params.willRetry === true)) {
      endedCycle = Math.max(endedCycle, cycle);
      dropHeldSteers();
    }
  };

  // Steers (a person's `respond` to the running task): each goes into pi's running turn once, as pi's own steer
  // does (after the current tool batch, before the next model call). One that comes before its cycle's run has
  // started waits for the run; one for a run that has ended is answered steer_missed (the daemon settles the cycle).
  type Steer = { cycle: number; n: number; text: string };
  const steerKey = (s: { cycle: number; n: number }) => `${s.cycle}.${s.n}`;
  /** Steers handed to pi (a daemon that pushes one again, after a restart, gets its answer again, not a repeat). */
  const steered = new Set<string>();
  let held: Steer[] = [];
  let busy = false;
  const steerAnswer = (type: "steer_taken" | "steer_missed", s: Steer) =>
    send("child.event", { type, cycle: s.cycle, n: s.n });
  const deliverSteer = (s: Steer) => {
    steered.add(steerKey(s));
    pi.sendUserMessage(s.text, { deliverAs: "steer" });
    steerAnswer("steer_taken", s);
  };
  const runSteer = (s: Steer) => {
    if (steered.has(steerKey(s))) return steerAnswer("steer_taken", s);
    if (s.cycle < cycle || (s.cycle === cycle && endedCycle >= cycle)) return steerAnswer("steer_missed", s);
    if (s.cycle === cycle && busy && ctxRef !== undefined && !ctxRef.isIdle()) return deliverSteer(s);
    if (!held.some((h) => steerKey(h) === steerKey(s))) held.push(s); // its run has not started yet
  };
  const flushHeldSteers = () => {
    const now = held.filter((h) => h.cycle === cycle);
    held = held.filter((h) => h.cycle > cycle);
    for (const s of now) deliverSteer(s);
  };
  function dropHeldSteers() {
    const late = held.filter((h) => h.cycle <= endedCycle);
    held = held.filter((h) => h.cycle > endedCycle);
    for (const s of late) steerAnswer("steer_missed", s);
  }

  pi.registerTool({
    name: "crew_report",
    label: "Report result",
    description: CREW_REPORT_DESCRIPTION,
    parameters: CREW_REPORT_PARAMETERS as never,
    async execute(toolCallId: string, params: unknown) {
      const checked = checkCrewReport(params);
      if (typeof checked === "string") throw new Error(JSON.stringify({ error: checked }));
      // Only stored: the cycle is accepted at agent_end, when the report is known to be alone in the last batch.
      reports.set(toolCallId, checked);
      // terminate: pi makes no further model call after a batch of terminating results, so the report is the answer.
      return {
        content: [{ type: "text" as const, text: "{}" }],
        details: { outcome: checked.outcome },
        terminate: true,
      };
    },
  } as never);

  const accept = (report: CrewReport) => {
    if (env.resultPath) writeResultMd(env.resultPath, resultMdFor(report));
    sendEnd("child.report", { cycle, ...report, ...(env.resultPath ? { resultPath: env.resultPath } : {}) });
  };
  // pi reports a prompt it refuses (no API key, no model) to its own error listeners, not to the caller of
  // sendUserMessage: a prompt that has not started a run shortly after it was sent, with pi idle, did not run.
  let started = 0;
  const checkStarted = (forCycle: number, waitedMs = 0) =>
    setTimeout(() => {
      if (started >= forCycle || cycle !== forCycle || shuttingDown) return;
      const ctx = ctxRef;
      if (ctx && !ctx.isIdle()) return checkStarted(forCycle, waitedMs + 500); // compacting or queued: it runs
      const why = promptRefusal(ctx);
      // Without a known reason, give pi a generous while before calling it refused.
      if (why === undefined && waitedMs < 10_000) return checkStarted(forCycle, waitedMs + 500);
      send("child.event", {
        type: "prompt_failed",
        cycle: forCycle,
        errorMessage: why ?? "pi did not start the prompt",
      });
    }, 500).unref();
  pi.on("before_agent_start", async () => {
    started = Math.max(started, cycle);
  });
  // Sent from a later macrotask: inside agent_end pi may still count as streaming.
  const sendPrompt = (text: string, onSent?: () => void) =>
    setTimeout(() => {
      const idle = ctxRef?.isIdle() ?? true;
      const sent = idle ? pi.sendUserMessage(text) : pi.sendUserMessage(text, { deliverAs: "followUp" });
      onSent?.();
      Promise.resolve(sent).catch((e: unknown) =>
        send("child.event", { type: "prompt_failed", cycle, errorMessage: String(e) }),
      );
    }, 0);

  let retryErrors = 0;
  /** The line of the pi this runs in: its package's version, else what the session shows (1.x-only entries). */
  let line: PiLine | undefined = piLineOfVersion(readPiVersion());
  const lineOf = (ctx: ExtensionContext): PiLine => {
    line ??= ctx.sessionManager
      .getEntries()
      .map((e) => piLineOfEntry(e as { type: string }))
      .find((l) => l !== undefined);
    return line ?? "0.73";
  };
  /** pi 1.x: an error ending whose outlook pi decides after agent_end; sent (final) at agent_settled. */
  let awaitingSettle: { cycle: number; params: Params<"child.event"> } | undefined;
  pi.on("agent_end", async (ev, ctx) => {
    ctxRef = ctx;
    busy = false;
    const messages = ev.messages as unknown as Record<string, unknown>[];
    const last = [...messages].reverse().find((m) => m.role === "assistant");
    const params: Params<"child.event"> = {
      type: "agent_end",
      cycle,
      sessionFile: ctx.sessionManager.getSessionFile() ?? null,
    };
    if (typeof last?.stopReason === "string") params.stopReason = last.stopReason;
    if (typeof last?.errorMessage === "string") params.errorMessage = last.errorMessage;
    // Will pi retry? Each line's own signal (core/session/retry-outlook.ts): 0.73's rule now, or 1.x's agent_settled later.
    awaitingSettle = undefined;
    const errorMessage = last?.errorMessage as string | undefined;
    retryErrors = last?.stopReason === "error" && isRetryableError073(errorMessage) ? retryErrors + 1 : 0;
    const outlook =
      last?.stopReason === "error"
        ? errorEndingOutlook(lineOf(ctx), {
            errorMessage,
            settings: readRetrySettings(ctx.cwd),
            retryableInARow: retryErrors,
          })
        : "final";
    params.willRetry = outlook !== "final";
    if (outlook === "await_settle") awaitingSettle = { cycle, params: { ...params, willRetry: false } };
    const verdict = judgeCycle(messages);
    if (verdict.kind === "accepted") {
      const call = (last?.content as { type?: string; id?: string }[]).find((c) => c?.type === "toolCall");
      const report = reports.get(call?.id ?? "") ?? checkCrewReport(verdict.args);
      if (typeof report !== "string") accept(report);
    } else if (verdict.kind === "reportless" && supervised && !shuttingDown) {
      reports.clear();
      if (guard.onReportless() === "finalize") {
        send("child.event", { type: "finalize_prompt", cycle, why: verdict.why });
        sendPrompt(FINALIZE_PROMPT);
      } else {
        sendEnd("child.event", { type: "contract_error", cycle, why: verdict.why });
      }
      return; // not settled: the follow-up runs, or the daemon settles on the contract error
    }
    reports.clear();
    sendEnd("child.event", params);
  });

  // pi 1.x: no retry, compaction or queued continuation follows, so a held error ending is final.
  // (0.73's types do not name the event; 0.73 never fires it.)
  (pi.on as (event: string, handler: () => Promise<void>) => void)("agent_settled", async () => {
    const held = awaitingSettle;
    awaitingSettle = undefined;
    if (held && held.cycle === cycle) sendEnd("child.event", held.params);
  });

  if (!supervised) return; // not supervised: an accepted crew_report still writes result.md

  const runPrompt = (p: { cycle: number; text: string }) => {
    // A cycle runs once: a prompt pushed again (a reconnect, a restarted daemon) is acknowledged, not re-run.
    if (p.cycle <= ranCycle) {
      send("child.event", { type: "prompt_accepted", cycle: p.cycle });
      if (lastEnd?.cycle === p.cycle) for (const m of lastEnd.msgs) send(m.method, m.params);
      return;
    }
    ranCycle = p.cycle;
    // A new cycle (the task, or a crew_respond follow-up): validation starts fresh. A later macrotask: a prompt
    // sent inside session_start would race pi's own session wiring.
    cycle = p.cycle;
    guard.newCycle();
    reports.clear();
    sendPrompt(p.text, () => {
      send("child.event", { type: "prompt_accepted", cycle: p.cycle });
      checkStarted(p.cycle);
    });
  };

  const attach = async (): Promise<void> => {
    if (shuttingDown) return;
    try {
      const c = await connect(env.socket!, {
        kind: "child",
        taskId: env.taskId!,
        token: env.token!,
        connectTimeoutMs: 3000,
        hello: { pid: process.pid, sessionFile: ctxRef?.sessionManager.getSessionFile() ?? null },
        // The daemon pushes the prompt right after hello, possibly in the same chunk as the reply.
        pushes: {
          "child.prompt": (p) => runPrompt(p),
          "child.steer": (p) => runSteer(p),
          "child.abort": () => ctxRef?.abort(),
        },
      });
      client = c;
      disconnectedAt = undefined;
      c.onClose(() => {
        client = undefined;
        retry();
      });
      for (const b of backlog.splice(0)) send(b.method, b.params);
    } catch (e) {
      // A refused token will never work; anything else may be a daemon restart.
      if ((e as { code?: string }).code === "UNAUTHORIZED") return;
      retry();
    }
  };
  // A child must not outlive its supervisor: idle and cut off from its daemon (home deleted, or the daemon gone
  // for longer than it would have kept this child idle), it ends pi. A running cycle is never cut short.
  const idleMs = Number(process.env.DSH_HERDR_IDLE_MS ?? "600000");
  let disconnectedAt: number | undefined;
  const orphaned = (): boolean => {
    if (busy || !(ctxRef?.isIdle() ?? true)) return false;
    if (!existsSync(dirname(env.socket!))) return true;
    return idleMs > 0 && disconnectedAt !== undefined && Date.now() - disconnectedAt > idleMs;
  };
  const retry = () => {
    if (shuttingDown) return;
    disconnectedAt ??= Date.now();
    if (orphaned()) {
      shuttingDown = true;
      ctxRef?.shutdown();
      // pi's RPC mode acts on a shutdown request only after its next command, and none will come: SIGTERM runs
      // the same graceful exit (pi handles it) if the request has not ended the process by then.
      setTimeout(() => process.kill(process.pid, "SIGTERM"), 2000).unref();
      return;
    }
    setTimeout(() => void attach(), 1000).unref();
  };

  pi.on("session_start", async (_ev, ctx) => {
    ctxRef = ctx;
    if (!client) await attach();
  });
  pi.on("agent_start", async () => {
    busy = true;
    started = Math.max(started, cycle);
    send("child.event", { type: "agent_start", cycle });
    flushHeldSteers(); // pi streams now: a steer joins this run
  });
  pi.on("session_shutdown", async () => {
    shuttingDown = true;
    if (client && !client.closed) {
      await client.request("child.event", { type: "shutdown", cycle }, { timeoutMs: 2000 }).catch(() => undefined);
      client.close();
    }
  });
}

/** Why pi will not run a prompt, in pi's own words where it has them (its model registry), else undefined. */
function promptRefusal(ctx: ExtensionContext | undefined): string | undefined {
  const c = ctx as unknown as
    | { model?: { provider?: string; id?: string }; modelRegistry?: { hasConfiguredAuth?(m: unknown): boolean } }
    | undefined;
  if (!c) return undefined;
  if (!c.model) return "No model selected.";
  const auth = c.modelRegistry?.hasConfiguredAuth;
  if (typeof auth === "function" && !auth.call(c.modelRegistry, c.model))
    return `No API key found for ${c.model.provider ?? "the model's provider"}.`;
  return undefined;
}
