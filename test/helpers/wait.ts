// Waiting in tests: poll for a condition (never a fixed sleep for ordering), and wait for a pi RPC child's response
// to one command or for it to go quiet.
import type { RpcPi } from "../../fixtures/scripted-model/rpc-child.js";

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * Polls `check` until it returns a value that is not undefined, null or false, and returns that value; fails naming
 * `what` after timeoutMs.
 */
export async function until<T>(
  what: string,
  check: () => T | undefined | null | false | Promise<T | undefined | null | false>,
  timeoutMs = 60_000,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== null && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

export interface RpcResponse {
  success: boolean;
  data?: any;
  error?: string;
}

let rpcSeq = 0;
/** Send an RPC command with an id and wait for pi's response to it (read from the event list: no cursor moves). */
export async function rpcCommand(pi: RpcPi, cmd: Record<string, unknown>, timeoutMs = 30_000): Promise<RpcResponse> {
  const id = `rpc${++rpcSeq}`;
  const from = pi.events.length;
  pi.send({ ...cmd, id } as Parameters<RpcPi["send"]>[0]);
  return until(
    `pi's response to ${String(cmd.type)}`,
    () => pi.events.slice(from).find((e) => e.type === "response" && e.id === id) as RpcResponse | undefined,
    timeoutMs,
  );
}

/**
 * Until pi runs no turn, compacts nothing and holds no queued message, twice in a row: a delivery starts a turn of
 * its own, and pi refuses a prompt while a turn runs ("Agent is already processing") or compacts mid-turn.
 */
export async function untilQuiet(pi: RpcPi): Promise<void> {
  for (let calm = 0, tries = 0; calm < 2; tries++) {
    if (tries > 300) throw new Error("the owner pi never went quiet");
    const r = await rpcCommand(pi, { type: "get_state" });
    calm = r.data && !r.data.isStreaming && !r.data.isCompacting && r.data.pendingMessageCount === 0 ? calm + 1 : 0;
    await sleep(200);
  }
}
