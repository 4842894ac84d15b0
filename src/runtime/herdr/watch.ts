// Push events for one child from Herdr's events.subscribe; resubscribes when the stream drops, and reports
// `gone` when Herdr no longer knows the pane.
import type { HerdrStatus } from "../../core/types.js";
import type { ChildExit, RuntimeEvent, RuntimeHandle } from "../types.js";
import { isGone } from "./errors.js";
import type { HerdrEvent, HerdrSubscription, HerdrTransport } from "./transport.js";

export interface Probe {
  paneExists: boolean;
  state: HerdrStatus | "missing";
}

const STATUSES = new Set<string>(["idle", "working", "blocked", "done", "unknown"]);

export interface WatchDeps {
  transport: HerdrTransport;
  /** The current pane and agent state, read after a (re)subscribe so no transition is missed. */
  probe(h: RuntimeHandle): Promise<Probe>;
  /** The child's exit as our own evidence records it (the starter's exit file). */
  exit?(h: RuntimeHandle): Promise<ChildExit>;
  /**
   * The child's liveness is our own evidence (the starter): Herdr releasing its agent is only a hint to look, since
   * its agent detection may lose a live pi or never see one.
   */
  ownEvidence?: boolean;
  resubscribeMs?: number;
  /** Poll interval when the transport cannot stream events (the CLI transport). */
  pollMs?: number;
  /**
   * While subscribed, the state is also read this often (default 5 s): a pane's subscription can go mute (its pane
   * died under it, or Herdr stopped pushing) without the connection closing; a read that finds a change the stream
   * did not bring re-makes the subscription.
   */
  checkMs?: number;
}

export function watchPane(deps: WatchDeps, handle: RuntimeHandle, onEvent: (e: RuntimeEvent) => void): () => void {
  const paneId = handle.paneId as string;
  let stopped = false;
  let sub: HerdrSubscription | undefined;
  let timer: NodeJS.Timeout | undefined;
  let last: string | undefined;
  let ended = false;

  const emit = (e: RuntimeEvent): void => {
    if (stopped) return;
    if (e.type === "state") {
      if (e.state === last) return;
      last = e.state;
    }
    if (e.type === "exited") {
      if (ended) return;
      ended = true;
    }
    onEvent(e);
    if (e.type === "gone") stop();
  };

  const exited = async (): Promise<void> => {
    const exit = (await deps.exit?.(handle).catch(() => undefined)) ?? { code: null };
    emit({ type: "exited", exit });
  };

  const onLine = (e: HerdrEvent): void => {
    const d = e.data;
    if (d.pane_id !== paneId) return;
    if (e.event === "pane.agent_status_changed" && typeof d.agent_status === "string" && STATUSES.has(d.agent_status)) {
      emit({ type: "state", state: d.agent_status as HerdrStatus });
    } else if (e.event === "pane_closed") {
      emit({ type: "gone" });
    } else if (e.event === "pane_exited") {
      void exited();
    } else if (e.event === "pane_agent_detected" && d.released === true) {
      if (deps.ownEvidence) void check().catch(() => undefined);
      else void exited();
    }
  };

  const check = async (): Promise<boolean> => {
    const before = `${last}/${ended}`;
    const p = await deps.probe(handle);
    if (!p.paneExists) emit({ type: "gone" });
    else if (p.state === "missing") await exited();
    else emit({ type: "state", state: p.state });
    return `${last}/${ended}` !== before;
  };

  let checker: NodeJS.Timeout | undefined;
  const checkNow = (): void => {
    void check()
      .then((missed) => {
        // The stream missed what the read found: it is mute; make a new one.
        if (missed && sub && !stopped) {
          const old = sub;
          sub = undefined;
          old.close();
          retry();
        }
      })
      .catch(() => undefined);
  };

  const start = async (): Promise<void> => {
    if (stopped) return;
    if (!deps.transport.subscribe) {
      await check().catch(() => undefined);
      if (!stopped) timer = setTimeout(() => void start(), deps.pollMs ?? 1000);
      return;
    }
    try {
      const s = await deps.transport.subscribe(
        [
          { type: "pane.agent_status_changed", pane_id: paneId },
          { type: "pane.closed" },
          { type: "pane.exited" },
          { type: "pane.agent_detected" },
        ],
        { onEvent: onLine, onEnd: () => retry() },
      );
      if (stopped) return s.close();
      sub = s;
      await check();
      checker ??= setInterval(checkNow, deps.checkMs ?? 5_000);
    } catch (e) {
      if (isGone(e)) emit({ type: "gone" });
      else retry();
    }
  };

  const retry = (): void => {
    sub = undefined;
    if (stopped) return;
    timer = setTimeout(() => void start(), deps.resubscribeMs ?? 500);
  };

  const stop = (): void => {
    stopped = true;
    if (timer) clearTimeout(timer);
    if (checker) clearInterval(checker);
    sub?.close();
  };

  void start();
  return stop;
}
