// The pi extension entry of this package (package.json "pi".extensions). The extension itself is compiled to
// dist/ (npm's prepare builds it at install); from a checkout that was never built, pi would otherwise load the
// bundled skill without it and the model would call crew_* tools that do not exist. This says so instead, in the
// TUI and to the model, naming the fix.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const built = join(root, "dist", "src", "extensions", "owner.js");

export default async function dshHerdrOwner(pi) {
  if (existsSync(built)) {
    const mod = await import(pathToFileURL(built).href);
    return mod.default(pi);
  }
  const fix = `dsh-herdr is not built: run \`npm ci\` in ${root}, then /reload`;
  pi.on("session_start", (_event, ctx) => ctx.ui?.notify?.(fix, "error"));
  pi.on("before_agent_start", (event) => ({
    systemPrompt: `${event.systemPrompt}\n\nThe dsh-herdr crew_* tools are not available (${fix}). Tell the user so; do not call them.`,
  }));
}
