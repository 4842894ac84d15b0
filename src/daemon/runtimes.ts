// Runtime instances for the daemon, created lazily from config: herdr, tmux or headless.
import { execa } from "execa";
import type { RuntimeKind } from "../core/types.js";
import type { Runtime } from "../runtime/types.js";
import type { Config } from "../store/config.js";
import { createTmuxRuntime } from "../runtime/tmux/runtime.js";
import { createHeadlessRuntime } from "../runtime/headless/runtime.js";
import { createHerdrRuntime, herdrPing } from "../runtime/herdr/index.js";

export interface Runtimes {
  get(kind: RuntimeKind): Runtime;
  /** `auto`: herdr when a Herdr server answers ping, else tmux when installed, else headless. */
  pick(): Promise<RuntimeKind>;
}

export function createRuntimes(config: () => Config, env: NodeJS.ProcessEnv = process.env): Runtimes {
  const cache = new Map<RuntimeKind, Runtime>();
  const herdrOpts = () => {
    const c = config();
    return {
      ...(c.herdrSocketPath ? { socketPath: c.herdrSocketPath } : {}),
      ...(c.herdrSession ? { session: c.herdrSession } : {}),
      ...(c.herdrBin ? { herdrBin: c.herdrBin } : {}),
      env,
    };
  };
  return {
    get(kind) {
      let r = cache.get(kind);
      if (!r) {
        r = kind === "tmux" ? createTmuxRuntime({ socketName: config().tmuxSocket }) : kind === "headless" ? createHeadlessRuntime() : createHerdrRuntime(herdrOpts());
        cache.set(kind, r);
      }
      return r;
    },
    async pick() {
      if ((await herdrPing(herdrOpts())).ok) return "herdr";
      const tmux = await execa("tmux", ["-V"], { reject: false, stdin: "ignore" }).catch(() => undefined);
      return tmux?.exitCode === 0 ? "tmux" : "headless";
    },
  };
}
