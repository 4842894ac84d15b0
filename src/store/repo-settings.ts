// A repository's own settings: `.dsh-herdr.json` at its root (shared with the project, in git or not), overridden key
// by key by config.json `repos.<root>` (the person's own). Lists (include, checks) are joined, in that order; single
// values (setup, timeouts) are the most specific one. A spawn's own values go on top (src/daemon/workdir-setup.ts).
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { type Config, type RepoSettings, validateRepoSettings } from "./config.js";
import { readBoundedSync } from "./fsio.js";

export const REPO_SETTINGS_FILE = ".dsh-herdr.json";
const MAX_BYTES = 1024 * 1024;

/** Items of both lists, in order, each once. */
export function joinLists(a: readonly string[] | undefined, b: readonly string[] | undefined): string[] {
  return [...new Set([...(a ?? []), ...(b ?? [])])];
}

/** Two settings merged: `over`'s single values win, the lists are joined. */
export function mergeRepoSettings(base: RepoSettings, over: RepoSettings): RepoSettings {
  const out: RepoSettings = {};
  const include = joinLists(base.worktree?.include, over.worktree?.include);
  const setup = over.worktree?.setup ?? base.worktree?.setup;
  const setupTimeoutMs = over.worktree?.setupTimeoutMs ?? base.worktree?.setupTimeoutMs;
  if (include.length || setup !== undefined || setupTimeoutMs !== undefined)
    out.worktree = {
      ...(include.length ? { include } : {}),
      ...(setup !== undefined ? { setup } : {}),
      ...(setupTimeoutMs !== undefined ? { setupTimeoutMs } : {}),
    };
  const checks = joinLists(base.checks, over.checks);
  if (checks.length) out.checks = checks;
  const checkTimeoutMs = over.checkTimeoutMs ?? base.checkTimeoutMs;
  if (checkTimeoutMs !== undefined) out.checkTimeoutMs = checkTimeoutMs;
  return out;
}

/** The settings in `<root>/.dsh-herdr.json` ({} when there is none); CONFIG_INVALID naming the file and the key. */
export function readRepoFile(root: string): RepoSettings {
  const file = join(root, REPO_SETTINGS_FILE);
  const buf = readBoundedSync(file, {
    maxBytes: MAX_BYTES,
    refuse: (why) => new DshError("CONFIG_INVALID", `${file} ${why}; make it a JSON file of the repository's settings`),
  });
  if (buf === undefined) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(buf.toString("utf8"));
  } catch (e) {
    throw new DshError(
      "CONFIG_INVALID",
      `${file} is not valid JSON (${(e as Error).message}); fix it (its keys: worktree.include, worktree.setup, checks)`,
    );
  }
  validateRepoSettings(parsed, file);
  const { $schema: _s, ...settings } = parsed as RepoSettings & { $schema?: string };
  return settings;
}

/** The repository's settings: its .dsh-herdr.json, then config.json repos.<root> over it. */
export function repoSettingsOf(root: string, config: Pick<Config, "repos">): RepoSettings {
  return mergeRepoSettings(readRepoFile(root), ownSettings(root, config.repos) ?? {});
}

/** config.json repos.<root>: by the path as written, else by where it leads (git gives the root's real path). */
function ownSettings(root: string, repos: Config["repos"]): RepoSettings | undefined {
  if (!repos) return undefined;
  const key = root.replace(/(.)\/+$/, "$1");
  if (repos[key]) return repos[key];
  for (const [k, v] of Object.entries(repos)) {
    try {
      if (realpathSync(k) === key) return v;
    } catch {
      // a path that does not exist names no repository here
    }
  }
  return undefined;
}
