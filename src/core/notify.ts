// Notifications (issue 26): what config.json `notify` holds, which targets a status goes to, and the body a webhook
// gets. Pure; sending, signing and the durable queue are src/notify/.
import type { AgentResult, AgentStatus } from "./types.js";

/** The statuses a notification is sent for: every settled cycle's status (and a task that turns blocked). */
export const NOTIFY_STATUSES = ["completed", "blocked", "failed", "gone", "interrupted"] as const;
export type NotifyStatus = (typeof NOTIFY_STATUSES)[number];

export interface WebhookTarget {
  url: string;
  /** HMAC-SHA256 key: the body is signed in X-DSH-Herdr-Signature-256. */
  secret?: string;
  /** Only these statuses (default: all of NOTIFY_STATUSES). */
  on?: NotifyStatus[];
  /** Extra request headers (e.g. Authorization); ours (content type, signature, delivery id) win. */
  headers?: Record<string, string>;
  /** One request's deadline (default 10 s). */
  timeoutMs?: number;
}

export interface CommandTarget {
  /** A command line run by /bin/sh, or an argv run as is; the task's facts are in its environment only. */
  command: string | string[];
  on?: NotifyStatus[];
  /** The command is ended (its process group) after this long (default 30 s). */
  timeoutMs?: number;
}

export interface NotifyConfig {
  webhooks?: WebhookTarget[];
  commands?: CommandTarget[];
}

export const WEBHOOK_TIMEOUT_MS = 10_000;
export const COMMAND_TIMEOUT_MS = 30_000;

/** The body every webhook gets: no prompt, no secrets. `at`: when the status was reached (ISO 8601, UTC). */
export interface NotifyBody {
  deliveryId: string;
  taskId: string;
  /** The agent's name (`worker-model-a1b2`). */
  agent: string;
  status: NotifyStatus;
  summary: string;
  nextAction: AgentResult["nextAction"];
  error?: { code: string; message: string };
  owner: string;
  /** The machine the task ran on (`spawn --machine`); absent: here. */
  machine?: string;
  at: string;
}

export const isNotifyStatus = (s: AgentStatus | string): s is NotifyStatus =>
  (NOTIFY_STATUSES as readonly string[]).includes(s);

/**
 * One id per task, cycle and status: the same across retries and restarts, so a receiver can drop a repeat. A task
 * that turns blocked and then settles blocked in the same cycle is one delivery.
 */
export function notifyDeliveryId(taskId: string, cycle: number, status: NotifyStatus): string {
  return `${taskId}-c${cycle}-${status}`;
}

/** The webhook body for a result whose status is one of NOTIFY_STATUSES; `atMs`: when it got there. */
export function notifyBody(result: AgentResult, cycle: number, atMs: number): NotifyBody | undefined {
  const status = result.status;
  if (!isNotifyStatus(status)) return undefined;
  return {
    deliveryId: notifyDeliveryId(result.taskId, cycle, status),
    taskId: result.taskId,
    agent: result.agent.name,
    status,
    summary: result.summary,
    nextAction: result.nextAction,
    ...(result.error ? { error: { code: result.error.code, message: result.error.message } } : {}),
    owner: result.owner ?? "cli",
    ...(result.agent.machine ? { machine: result.agent.machine } : {}),
    at: new Date(atMs).toISOString(),
  };
}

/** The target wants this status (no `on`: every status). */
export const wants = (t: { on?: readonly string[] }, status: string): boolean =>
  t.on === undefined || t.on.includes(status);

/** What a command target finds in its environment (never interpolated into a command line). */
export function notifyEnv(body: NotifyBody): Record<string, string> {
  return {
    DSH_HERDR_TASK_ID: body.taskId,
    DSH_HERDR_STATUS: body.status,
    DSH_HERDR_SUMMARY: body.summary,
    DSH_HERDR_AGENT: body.agent,
    DSH_HERDR_NEXT_ACTION: body.nextAction,
    DSH_HERDR_OWNER: body.owner,
    DSH_HERDR_DELIVERY_ID: body.deliveryId,
    DSH_HERDR_AT: body.at,
    ...(body.machine ? { DSH_HERDR_MACHINE: body.machine } : {}),
    ...(body.error ? { DSH_HERDR_ERROR: `${body.error.code}: ${body.error.message}` } : {}),
  };
}
