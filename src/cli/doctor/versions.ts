// Version strings of the tools doctor checks: asked of the tool, compared numerically.
import { execa } from "execa";

/** Compare dotted versions numerically; the pre-release tail is ignored. */
export function compareVersions(a: string, b: string): number {
  const pa = a
    .replace(/^v/, "")
    .split(/[.-]/)
    .map((x) => Number.parseInt(x, 10) || 0);
  const pb = b
    .replace(/^v/, "")
    .split(/[.-]/)
    .map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < 3; i++) if ((pa[i] ?? 0) !== (pb[i] ?? 0)) return (pa[i] ?? 0) - (pb[i] ?? 0);
  return 0;
}

export async function versionOf(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<string | undefined> {
  const r = await execa(cmd, args, { env, reject: false, timeout: 10_000, stdin: "ignore" });
  if (r.failed) return undefined;
  const m = /\d+\.\d+(\.\d+)?/.exec(`${r.stdout} ${r.stderr}`);
  return m?.[0];
}
