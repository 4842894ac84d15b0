// A machine link's vocabulary: its options, its state, and the events it reports (up, down, push, closed).
import type { DshError } from "../core/errors.js";
import type { HelloResult } from "../client/index.js";
import type { BackoffPolicy, MachineSpec, SshOptions } from "../core/machines.js";

export interface LinkOptions {
  /** The machine's label in config.json. */
  label: string;
  machine: MachineSpec;
  /** Our version, sent in hello. */
  version?: string;
  /** Environment for ssh (its HOME finds ~/.ssh); default process.env. */
  env?: NodeJS.ProcessEnv;
  /** The ssh client binary; default `ssh` on PATH. */
  sshBin?: string;
  ssh?: SshOptions;
  /** Reconnect after a drop or a failed attempt (default true); false makes a one-shot link. */
  reconnect?: boolean;
  backoff?: BackoffPolicy;
  /** For the hello, which waits for the remote daemon to start when it was down (default 60 s). */
  helloTimeoutMs?: number;
  /** Default per-request timeout (default 30 s). */
  requestTimeoutMs?: number;
  /** Jitter source in [0, 1) (tests pin it). */
  random?: () => number;
  /**
   * Where the link may make its forward's socket (0700): with it, the link asks ssh to forward a socket here to the
   * remote daemon's and talks over that, keeping the `daemon connect` bridge only where the server refuses
   * (link-forward.ts). Without it (one-shot CLI connections), the bridge.
   */
  forwardDir?: string;
}

export type LinkTransport = "bridge" | "forward";

export type LinkState = "connecting" | "up" | "down" | "closed";

export interface LinkUp {
  hello: HelloResult;
  /** The ssh process carrying this connection. */
  sshPid: number | undefined;
  transport: LinkTransport;
  /** Why this connection is not over a forward, when one was tried (FORWARD_FAILED with ssh's line). */
  forwardError?: DshError;
}

export interface LinkDown {
  error: DshError;
  /** Epoch ms since when the machine has been unreachable (the first failure of this outage). */
  since: number;
  /** Delay until the next attempt; undefined when the link does not reconnect. */
  retryInMs: number | undefined;
}

export interface MachineLinkEvents {
  up: [LinkUp];
  down: [LinkDown];
  /** A daemon push (no id): method and params. */
  push: [string, unknown];
  closed: [];
}
