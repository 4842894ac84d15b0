// A runtime that runs nothing, for daemon tests that drive the child themselves: every method answers as a live,
// quiet child would; a test passes the methods it watches (usually launch, sometimes close).
import type { Runtime } from "../../src/runtime/types.js";

export function stubRuntime(overrides: Partial<Runtime> = {}): Runtime {
  return {
    kind: "headless",
    launch: async () => ({ runtime: "headless", pid: process.pid }),
    isAlive: async () => true,
    exitStatus: async () => null,
    readOutput: async () => "",
    sendText: async () => undefined,
    sendKeys: async () => undefined,
    close: async () => undefined,
    watch: () => () => undefined,
    ...overrides,
  };
}
