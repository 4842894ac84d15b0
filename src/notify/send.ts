// One notification, sent once: a signed POST to a webhook, or a command run with the task's facts in its
// environment. Retries, durability and scheduling are service.ts's; this module only makes one attempt and says how
// it went (used by `dsh-herdr notify test` too).
import { createHash, createHmac } from "node:crypto";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import {
  COMMAND_TIMEOUT_MS,
  notifyEnv,
  WEBHOOK_TIMEOUT_MS,
  type CommandTarget,
  type NotifyBody,
  type WebhookTarget,
} from "../core/notify.js";
import { runProcess } from "../process/run.js";

export const SIGNATURE_HEADER = "X-DSH-Herdr-Signature-256";
export const DELIVERY_HEADER = "X-DSH-Herdr-Delivery";

/** What one attempt came to. `ok`: a 2xx answer (webhook) or a command that ran to its end with exit code 0. */
export interface Answer {
  ok: boolean;
  /** The HTTP status, when the receiver answered. */
  status?: number;
  /** The command's exit code, or null when a signal ended it. */
  exitCode?: number | null;
  /** Why there is no answer: a network error, the timeout, a command that could not start. */
  error?: string;
  /** The start of the answer's body, or the end of the command's output (each at most 2 KiB). */
  text?: string;
  durationMs: number;
}

/** `sha256=<hex>`: HMAC-SHA256 of the raw body with the secret (GitHub's scheme, with our header name). */
export function signBody(raw: string, secret: string): string {
  return `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`;
}

/** The body's exact bytes: what is signed is what is sent, on every retry. */
export const rawBody = (body: NotifyBody): string => JSON.stringify(body);

/** A stable key per target (never its URL or command, which may hold a token): the durable queue's name for it. */
export function targetKey(
  t: { kind: "webhook"; url: string } | { kind: "command"; command: string | string[] },
): string {
  const what = t.kind === "webhook" ? t.url : JSON.stringify(t.command);
  return `${t.kind === "webhook" ? "w" : "c"}-${createHash("sha256").update(what).digest("hex").slice(0, 16)}`;
}

/** A webhook as a log may name it: scheme, host and port only (a Slack-style URL carries its token in the path). */
export function webhookLabel(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return "(a webhook whose url does not parse)";
  }
}

const TEXT_MAX = 2048;

/** POST the body once, signed when the target has a secret; never throws. */
export function postWebhook(t: WebhookTarget, body: NotifyBody, userAgent: string): Promise<Answer> {
  const started = Date.now();
  const raw = rawBody(body);
  const headers: Record<string, string> = {
    ...(t.headers ?? {}),
    "Content-Type": "application/json",
    "Content-Length": String(Buffer.byteLength(raw)),
    "User-Agent": userAgent,
    [DELIVERY_HEADER]: body.deliveryId,
  };
  // Ours win over same-named user headers, whatever their case.
  for (const k of Object.keys(t.headers ?? {}))
    if (Object.keys(headers).some((h) => h !== k && h.toLowerCase() === k.toLowerCase())) delete headers[k];
  if (t.secret) headers[SIGNATURE_HEADER] = signBody(raw, t.secret);
  const timeoutMs = t.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  return new Promise<Answer>((resolve) => {
    let done = false;
    const finish = (a: Omit<Answer, "durationMs">) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ...a, durationMs: Date.now() - started });
    };
    let url: URL;
    try {
      url = new URL(t.url);
      if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`${url.protocol} is not http(s)`);
    } catch (e) {
      return finish({ ok: false, error: `bad url: ${(e as Error).message}` });
    }
    // One deadline for the whole exchange (connect, send, answer): a receiver that accepts and never answers is cut.
    const timer = setTimeout(() => {
      req.destroy(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    timer.unref();
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    // No keep-alive agent: a notification is one request, and a pooled socket would hold a CLI process open.
    const req = send(url, { method: "POST", headers, agent: false }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on("data", (c: Buffer) => {
        if (size < TEXT_MAX) chunks.push(c);
        size += c.length;
      });
      const end = () => {
        const status = res.statusCode ?? 0;
        const text = Buffer.concat(chunks).toString("utf8").slice(0, TEXT_MAX);
        finish({ ok: status >= 200 && status < 300, status, ...(text ? { text } : {}) });
      };
      res.on("end", end);
      res.on("error", end);
      res.on("close", end);
    });
    req.on("error", (e: Error) => finish({ ok: false, error: e.message }));
    req.end(raw);
  });
}

/**
 * Run a command target once: a string through /bin/sh (the user's own line from config.json), an argv as is. The
 * task's facts are only in its environment (DSH_HERDR_TASK_ID, _STATUS, _SUMMARY, _AGENT, ...): nothing from a task
 * is ever put into a command line. Its process group is ended at the timeout, or when `signal` aborts (the daemon
 * stops); what it leaves running in its group ends when it exits. Never throws.
 */
export async function runCommand(
  t: CommandTarget,
  body: NotifyBody,
  baseEnv: NodeJS.ProcessEnv = process.env,
  signal?: AbortSignal,
): Promise<Answer> {
  const [file, args] =
    typeof t.command === "string" ? ["/bin/sh", ["-c", t.command]] : [t.command[0]!, t.command.slice(1)];
  const timeoutMs = t.timeoutMs ?? COMMAND_TIMEOUT_MS;
  const r = await runProcess({
    file,
    args,
    env: { ...baseEnv, ...notifyEnv(body) },
    timeoutMs,
    ...(signal !== undefined ? { signal } : {}),
    merge: true,
    keep: "tail",
    keepBytes: TEXT_MAX,
  });
  const text = r.output ? { text: r.output } : {};
  if (r.spawnError !== undefined) return { ok: false, error: r.spawnError, ...text, durationMs: r.durationMs };
  const how = r.signal ? ` (${r.signal})` : "";
  return {
    ok: r.exitCode === 0 && r.ended === undefined,
    exitCode: r.exitCode,
    ...(r.timedOut ? { error: `ended after its ${timeoutMs} ms timeout${how}` } : {}),
    ...(r.cancelled ? { error: `ended: the daemon stopped${how}` } : {}),
    ...text,
    durationMs: r.durationMs,
  };
}

/** One line for a person or a log: `200 OK in 12 ms`, `exit 0 in 5 ms`, `error: connect ECONNREFUSED ...`. */
export function describeAnswer(a: Answer): string {
  const took = `in ${a.durationMs} ms`;
  if (a.status !== undefined) return `HTTP ${a.status} ${took}`;
  if (a.error !== undefined) return `error: ${a.error} (${took})`;
  return a.exitCode === null ? `ended by a signal ${took}` : `exit ${a.exitCode} ${took}`;
}
