// The child extension, loaded into every supervised pi with `-ne -e <this file>`: the control channel between
// the child and the daemon for every runtime. It says hello with its task id and token, runs the prompts the
// daemon pushes (a new cycle each), reports lifecycle events, and provides crew_report.
// It imports only types from pi, so it loads on pi 0.73.1 and 1.x alike.
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { connect, type DaemonClient } from "../client/index.js";
import { isRetryableError } from "../core/session-reader.js";
import { readRetrySettings } from "./child-settings.js";
import { CREW_REPORT_DESCRIPTION, CREW_REPORT_PARAMETERS, checkCrewReport, resultMdFor, writeResultMd } from "./child-report.js";

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
  let shuttingDown = false;
  /** Events raised while disconnected wait here, in order. */
  const backlog: { method: string; params: Record<string, unknown> }[] = [];

  const send = (method: string, params: Record<string, unknown>) => {
    if (client && !client.closed) {
      client.request(method, params, { timeoutMs: 10_000 }).catch(() => undefined);
    } else if (backlog.length < 100) {
      backlog.push({ method, params });
    }
  };

  pi.registerTool({
    name: "crew_report",
    label: "Report result",
    description: CREW_REPORT_DESCRIPTION,
    parameters: CREW_REPORT_PARAMETERS as never,
    async execute(_toolCallId: string, params: unknown) {
      const checked = checkCrewReport(params);
      if (typeof checked === "string") throw new Error(JSON.stringify({ error: checked }));
      if (env.resultPath) writeResultMd(env.resultPath, resultMdFor(checked));
      send("child.report", { cycle, ...checked, ...(env.resultPath ? { resultPath: env.resultPath } : {}) });
      return { content: [{ type: "text" as const, text: "{}" }], details: { outcome: checked.outcome } };
    },
  } as never);

  if (!env.socket || !env.taskId || !env.token) return; // not supervised: crew_report still writes result.md

  const runPrompt = (p: { cycle: number; text: string }) => {
    // A later macrotask: a prompt sent inside session_start would race pi's own session wiring.
    setTimeout(() => {
      cycle = p.cycle;
      const idle = ctxRef?.isIdle() ?? true;
      const sent = idle ? pi.sendUserMessage(p.text) : pi.sendUserMessage(p.text, { deliverAs: "followUp" });
      send("child.event", { type: "prompt_accepted", cycle: p.cycle });
      Promise.resolve(sent).catch((e: unknown) => send("child.event", { type: "prompt_failed", cycle: p.cycle, errorMessage: String(e) }));
    }, 0);
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
          "child.prompt": (p: { cycle: number; text: string }) => runPrompt(p),
          "child.abort": () => ctxRef?.abort(),
        },
      });
      client = c;
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
  const retry = () => {
    if (!shuttingDown) setTimeout(() => void attach(), 1000).unref();
  };

  pi.on("session_start", async (_ev, ctx) => {
    ctxRef = ctx;
    if (!client) await attach();
  });
  pi.on("agent_start", async () => send("child.event", { type: "agent_start", cycle }));
  let retryErrors = 0;
  pi.on("agent_end", async (ev, ctx) => {
    const last = [...(ev.messages as unknown as Record<string, unknown>[])].reverse().find((m) => m.role === "assistant");
    const params: Record<string, unknown> = { type: "agent_end", cycle, sessionFile: ctx.sessionManager.getSessionFile() ?? null };
    if (typeof last?.stopReason === "string") params.stopReason = last.stopReason;
    if (typeof last?.errorMessage === "string") params.errorMessage = last.errorMessage;
    // pi 0.73.1 tells extensions nothing about auto-retry: judge it as pi does, from its retry settings.
    const retryable = last?.stopReason === "error" && isRetryableError(last.errorMessage as string | undefined);
    retryErrors = retryable ? retryErrors + 1 : 0;
    const retry = readRetrySettings(ctx.cwd);
    params.willRetry = retryable && retry.enabled && retryErrors <= retry.maxRetries;
    send("child.event", params);
  });
  pi.on("session_shutdown", async () => {
    shuttingDown = true;
    if (client && !client.closed) {
      await client.request("child.event", { type: "shutdown", cycle }, { timeoutMs: 2000 }).catch(() => undefined);
      client.close();
    }
  });
}
