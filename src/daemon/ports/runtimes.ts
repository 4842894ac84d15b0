// Runtime instances for the daemon, built once per kind from config through the runtime factory
// (src/daemon/ports/runtime-select.ts); `auto` is resolved by selectRuntime, whose reason goes to the log.
import type { RuntimeKind } from "../../core/types.js";
import type { Runtime } from "../../runtime/types.js";
import { createRuntime, selectRuntime, type RuntimeFactory, type RuntimeOptions } from "./runtime-select.js";
import { herdrPing } from "../../runtime/herdr/index.js";
import type { Config } from "../../store/config.js";
import type { Logger } from "../server/server.js";

export type RuntimeFactories = Partial<Record<RuntimeKind, RuntimeFactory>>;

export interface Runtimes {
  get(kind: RuntimeKind): Runtime;
  /** `auto`: herdr when a Herdr server answers ping, else tmux when installed, else headless (config may force one). */
  pick(): Promise<RuntimeKind>;
}

export interface RuntimesOptions {
  env?: NodeJS.ProcessEnv;
  /** Replace how a kind is built (benches and tests: a stub runtime); the rest use the built-in factories. */
  factories?: RuntimeFactories;
  log?: Logger;
}

export function createRuntimes(config: () => Config, opts: RuntimesOptions = {}): Runtimes {
  const env = opts.env ?? process.env;
  const cache = new Map<RuntimeKind, Runtime>();
  let lastReason: string | undefined;
  const herdrOpts = () => {
    const c = config();
    return {
      ...(c.herdrSocketPath ? { socketPath: c.herdrSocketPath } : {}),
      ...(c.herdrSession ? { session: c.herdrSession } : {}),
      ...(c.herdrBin ? { herdrBin: c.herdrBin } : {}),
      env,
    };
  };
  const runtimeOptions = (): RuntimeOptions => ({
    tmux: { socketName: config().tmuxSocket },
    headless: {},
    herdr: herdrOpts(),
  });
  return {
    get(kind) {
      let r = cache.get(kind);
      if (!r) {
        r = createRuntime(kind, runtimeOptions(), opts.factories ?? {});
        cache.set(kind, r);
      }
      return r;
    },
    async pick() {
      const sel = await selectRuntime({ config: config(), herdrPing: () => herdrPing(herdrOpts()) });
      // Logged when the answer changes, not on every spawn.
      if (sel.reason !== lastReason) opts.log?.info({ runtime: sel.kind, reason: sel.reason }, "runtime selected");
      lastReason = sel.reason;
      return sel.kind;
    },
  };
}
