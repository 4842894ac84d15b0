// A test-only pi extension: `/test-reload` runs pi's own reload (ctx.reload(), what `/reload` does in the TUI), so a
// real owner pi in RPC mode can be reloaded by a prompt. Loaded next to the owner extension by owner-fork-reload.
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default function reloadCommand(pi: ExtensionAPI): void {
  pi.registerCommand("test-reload", {
    description: "reload extensions, as /reload does",
    handler: async (_args, ctx) => {
      await ctx.reload();
    },
  });
}
