// The owner side of bench/status-latency in its own thread: it attaches as the bench's owner (the newest attach
// gets the deliveries) and runs the task.wait requests, stamping each push and each wait's return on its own event
// loop. In real use the owner is a pi process of its own; in the driver's thread its receipt waited behind the
// driver's playing of 100 children (their appends and agent_end requests), which the figure is not about.
// Times are monotonic ms (process.hrtime), the same clock in every thread.
import { readFileSync } from "node:fs";
import { get } from "node:http";
import { parentPort, workerData } from "node:worker_threads";
import { boardAddressPath, boardTokenPath } from "../src/board/token.js";
import { connect } from "../src/client/index.js";

export const monoMs = (): number => Number(process.hrtime.bigint()) / 1e6;

export type ToListener = { type: "wait"; taskId: string } | { type: "stop" };
export type FromListener =
  | { type: "ready" }
  | { type: "pushed"; taskId: string; at: number }
  | { type: "waited"; taskId: string; at: number }
  | { type: "board"; taskId: string; at: number };

/**
 * A browser board's live stream (src/board), read as the page reads it: each card event of a task that left the
 * running column is stamped. Resolves once the stream is open; without a board it does nothing.
 */
function watchBoard(home: string, on: (taskId: string) => void): Promise<() => void> {
  let url: URL;
  let token: string;
  try {
    url = new URL((JSON.parse(readFileSync(boardAddressPath(home), "utf8")) as { url: string }).url);
    token = readFileSync(boardTokenPath(home), "utf8").trim();
  } catch {
    return Promise.resolve(() => undefined);
  }
  return new Promise((resolve, reject) => {
    const req = get(
      { host: url.hostname, port: url.port, path: "/api/events", headers: { cookie: `dsh_board=${token}` } },
      (res) => {
        let buf = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          buf += d;
          for (let i; (i = buf.indexOf("\n\n")) >= 0; buf = buf.slice(i + 2)) {
            const block = buf.slice(0, i);
            if (!block.startsWith("event: card\n")) continue;
            const card = JSON.parse(block.slice(block.indexOf("data: ") + 6)) as { taskId: string; column: string };
            if (card.column !== "running") on(card.taskId);
          }
        });
        resolve(() => req.destroy());
      },
    );
    req.on("error", reject);
  });
}

async function main(): Promise<void> {
  // The same owner as the driver's connection: its hello proves it with the secret the first hello was issued.
  const { home, ownerId, secret, board } = workerData as {
    home: string;
    ownerId: string;
    secret?: string;
    /** Whether to open the board's stream (off for a daemon's CPU without a browser attached). */
    board: boolean;
  };
  const port = parentPort!;
  const send = (m: FromListener) => port.postMessage(m);
  const owner = await connect(home, {
    kind: "owner",
    ownerId,
    ...(secret ? { secret } : {}),
    timeoutMs: 120_000,
    pushes: {
      "owner.delivery": (p: { taskId: string }) => send({ type: "pushed", taskId: p.taskId, at: monoMs() }),
    },
  });
  await owner.request("owner.attach", {});
  const stopBoard = board
    ? await watchBoard(home, (taskId) => send({ type: "board", taskId, at: monoMs() }))
    : () => undefined;
  const waiter = await connect(home, { kind: "cli", timeoutMs: 120_000 });
  port.on("message", (m: ToListener) => {
    if (m.type === "stop") {
      owner.close();
      stopBoard();
      waiter.close();
      port.close();
      return;
    }
    void waiter.request("task.wait", { taskIds: [m.taskId], timeoutMs: 60_000 }, { timeoutMs: 70_000 }).then(
      () => send({ type: "waited", taskId: m.taskId, at: monoMs() }),
      () => undefined,
    );
  });
  send({ type: "ready" });
}

if (parentPort) void main();
