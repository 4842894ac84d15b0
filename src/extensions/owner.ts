// The owner extension (the package's pi extension): crew_* tools, delivery of results into the owner's session,
// status snapshots and reminders, and TUI cards, all over the dsh-herdr daemon's socket. The owner is the pi
// session id. It imports only types from pi, so it loads on pi 0.73.1 and 1.x alike.
import { randomBytes } from "node:crypto";
import { closeSync, openSync, readSync } from "node:fs";
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { type CardTheme, loadPiMarkdown, renderCrewCard } from "./cards.js";
import { ABORT_TYPE, DeliveryInjector, RESULT_TYPE } from "./owner-delivery.js";
import { OwnerLink, ownerHome, ownerSocketPath } from "./owner-link.js";
import { abortOpenWork, ownerRuntime } from "./owner-runtime.js";
import { OwnerStatus } from "./owner-status.js";
import { ownerMayLand } from "./owner-config.js";
import { listOpenSessions, registerOwnerTools } from "./owner-tools.js";

/** The id in a pi session file's header line (`{"type":"session","id":...}`), or undefined. */
export function sessionIdOfFile(path: string | undefined): string | undefined {
  if (!path) return undefined;
  try {
    const fd = openSync(path, "r");
    try {
      const buf = Buffer.alloc(4096);
      const n = readSync(fd, buf, 0, buf.length, 0);
      const header = JSON.parse(buf.subarray(0, n).toString("utf8").split("\n")[0] ?? "") as {
        type?: unknown;
        id?: unknown;
      };
      return header.type === "session" && typeof header.id === "string" ? header.id : undefined;
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
}

/** The custom session entry holding an owner's secret: `{ownerId, secret}`; /fork and /clone copy it along. */
export const OWNER_SECRET_TYPE = "dsh-herdr-owner";

/** The secret of ownerId from the session's custom entries (the newest one wins). */
export function ownerSecretIn(entries: readonly unknown[], ownerId: string): string | undefined {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i] as { type?: unknown; customType?: unknown; data?: { ownerId?: unknown; secret?: unknown } };
    if (
      e?.type === "custom" &&
      e.customType === OWNER_SECRET_TYPE &&
      e.data?.ownerId === ownerId &&
      typeof e.data.secret === "string"
    )
      return e.data.secret;
  }
  return undefined;
}

export default async function ownerExtension(pi: ExtensionAPI): Promise<void> {
  const markdown = await loadPiMarkdown();
  let ctxRef: ExtensionContext | undefined;
  const socketPath = ownerSocketPath();
  // Process-global: secrets of this process's sessions, the active owner, and a stale runtime to retire.
  const rt = ownerRuntime();
  const runtime = rt.runtime;
  let stale = rt.stale;
  const link: OwnerLink = new OwnerLink({
    socketPath,
    onDelivery: (d, ownerId) => {
      status.markChanged();
      injector.push(d, ownerId);
    },
    onStatusChange: () => status.markChanged(),
    secretOf: (ownerId) => runtime.secrets.get(ownerId),
    // Not on stderr: that is pi's terminal. A notice for the person, when a session is there to show it.
    onProtocolError: (e) => {
      try {
        ctxRef?.ui.notify(`dsh-herdr: ${e.code}: ${e.message}`, "warning");
      } catch {
        // The session is being replaced: nothing to show it in.
      }
    },
    onSecret: (ownerId, secret) => keepSecret(ownerId, secret),
    // Loaded when needed: most sessions never start a daemon, and starting one is what the CLI does too.
    ...(process.env.DSH_HERDR_SOCKET
      ? {}
      : {
          startDaemon: async () => (await import("../client/daemon-control.js")).startDaemon(ownerHome()),
          onDaemonStarted: (pid: number) => {
            try {
              ctxRef?.ui.notify(`dsh-herdr: started the daemon (pid ${pid}) at ${ownerHome()}`, "info");
            } catch {
              // The session is being replaced: the daemon runs all the same.
            }
          },
        }),
  });
  /** Keep an owner's secret: in this process's runtime and in the session (not sent to the model; /fork copies it). */
  function keepSecret(ownerId: string, secret: string): void {
    runtime.secrets.set(ownerId, secret);
    try {
      pi.appendEntry(OWNER_SECRET_TYPE, { ownerId, secret });
    } catch {
      // The session is being replaced: this process's runtime still has it (its next hellos, a /fork's move).
    }
  }
  const status = new OwnerStatus(link);
  const injector = new DeliveryInjector({ pi, link, ctx: () => ctxRef });

  registerOwnerTools(pi, { link, changed: () => status.markChanged(), mayLand: ownerMayLand() });
  const card = (m: { details?: unknown }, o: { expanded: boolean }, theme: CardTheme) =>
    renderCrewCard(m, o, theme, markdown);
  pi.registerMessageRenderer(RESULT_TYPE, card as never);
  pi.registerMessageRenderer(ABORT_TYPE, card as never);

  pi.on("session_start", async (ev, ctx) => {
    // pi builds a fresh extension instance per session, so the session forked from is named by its file, or (a
    // session pi never wrote: 0.73 writes none before its first assistant message) by the runtime's active owner.
    const previous =
      link.ownerId ??
      (ev.reason === "fork"
        ? (sessionIdOfFile((ev as { previousSessionFile?: string }).previousSessionFile) ?? runtime.active)
        : undefined);
    ctxRef = ctx;
    status.sessionStarted(ctx);
    const owner = ctx.sessionManager.getSessionId();
    // A runtime of another version ran this process's sessions until now (a /reload after an upgrade): its subagents
    // are aborted before this one attaches, so their abort cards are what the sessions see next.
    if (stale) {
      const owners = stale.owners;
      stale = undefined;
      await abortOpenWork(socketPath, owners, runtime.secrets);
    }
    // A resumed session's secret (issued to an earlier process): presented by its hello, and known here for a /fork
    // that loses the entries. One this process was issued is the newest (a collected owner is issued another).
    const own = ownerSecretIn(ctx.sessionManager.getEntries(), owner);
    if (own && !runtime.secrets.has(owner)) runtime.secrets.set(owner, own);
    // A new session chooses its secret before its first hello, which the daemon records: a reply lost to a daemon
    // crash cannot leave this session without the proof the daemon kept.
    if (!runtime.secrets.has(owner)) keepSecret(owner, randomBytes(32).toString("hex"));
    runtime.active = owner;
    runtime.owners.add(owner);
    await link.setOwner(owner);
    // /fork and /clone: open subagents and their queued results follow the conversation into the new session.
    if (ev.reason === "fork" && previous && previous !== owner) {
      // The proof that this session descends from the previous one: its secret, kept by this process's runtime or
      // copied into this session's entries.
      const secret = runtime.secrets.get(previous) ?? ownerSecretIn(ctx.sessionManager.getEntries(), previous);
      await link.request("owner.move", { fromOwnerId: previous, ...(secret ? { secret } : {}) }, 10_000).then(
        () => status.markChanged(),
        () => undefined,
      );
    }
  });

  pi.on("session_shutdown", async (ev) => {
    // pi replaces this session's ctx: touching it afterwards throws (and would end pi from a timer).
    ctxRef = undefined;
    // Quitting pi aborts this owner's active subagents; /new, /resume, /reload, /fork keep them running.
    if (ev.reason === "quit" && link.ownerId) {
      const ids = (await listOpenSessions(link).catch(() => [])).map((s) => s.subagent_id);
      if (ids.length) await link.request("task.abort", { taskIds: ids }, 5000).catch(() => undefined);
      link.close();
      return;
    }
    link.close();
  });

  pi.on("before_provider_request", async () => {
    status.modelCall();
  });
  // pi may still count as streaming inside agent_end: held abort cards go out from a later macrotask.
  pi.on("agent_end", async (_ev, ctx) => {
    status.runEnded(ctx);
    setTimeout(() => {
      try {
        injector.flushHeld();
      } catch {
        // The session was replaced in between (/new, /resume): its held notices are dropped with it.
      }
    }, 0);
  });
  // The answer to a request starts: the status message that request carried is written to the session now.
  pi.on("message_start", async (ev, ctx) => {
    if ((ev.message as { role?: string }).role === "assistant") status.answerStarted(ctx);
  });
  pi.on("session_compact", async (_ev, ctx) => status.compacted(ctx));
  pi.on("context", async (ev, ctx) => {
    const messages = await status.context(ev.messages as never, ctx);
    return messages ? { messages: messages as never } : undefined;
  });
}
