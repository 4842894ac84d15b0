// The tools on PATH the daemon runs: node itself, git, tmux.
import type { CheckResult } from "./types.js";
import { compareVersions, versionOf } from "./versions.js";

export const MIN_NODE = [20, 6] as const;

export function checkNode(version = process.versions.node): CheckResult {
  const ok = compareVersions(version, MIN_NODE.join(".")) >= 0;
  return ok
    ? { name: "node", level: "ok", detail: `node ${version}` }
    : {
        name: "node",
        level: "fail",
        detail: `node ${version} is too old`,
        fix: `install Node ${MIN_NODE.join(".")} or newer`,
      };
}

export async function checkGit(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const v = await versionOf("git", ["--version"], env);
  return v
    ? { name: "git", level: "ok", detail: `git ${v}` }
    : {
        name: "git",
        level: "fail",
        detail: "git not found on PATH",
        fix: "install git (apt-get install git / brew install git)",
      };
}

export async function checkTmux(env: NodeJS.ProcessEnv): Promise<CheckResult> {
  const v = await versionOf("tmux", ["-V"], env);
  return v
    ? { name: "tmux", level: "ok", detail: `tmux ${v}` }
    : {
        name: "tmux",
        level: "warn",
        detail: "tmux not found: the tmux runtime is unavailable (herdr or headless still work)",
        fix: "install tmux to watch children in panes",
      };
}
