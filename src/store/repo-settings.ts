// A repository's own settings: `.dsh-herdr.json` at its root (shared with the project, in git or not), overridden key
// by key by config.json `repos.<root>` (the person's own). Lists (include, checks) are joined, in that order; single
// values (setup, timeouts) are the most specific one. A spawn's own values go on top (src/daemon/task/workdir-setup.ts).
// The file's settings apply only while the person trusts its content (src/store/repo-trust.ts).
import { realpathSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { type Config, type RepoSettings, validateRepoSettings } from "./config.js";
import { readBoundedSync } from "./fsio.js";
import { readTrustBook, sha256Of, type TrustState, trustStateOf } from "./repo-trust.js";

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
  return readRepoFileHashed(root)?.settings ?? {};
}

export interface RepoFile {
  file: string;
  settings: RepoSettings;
  /** sha256 of the bytes the settings were parsed from: what a trust is of. */
  sha256: string;
}

/** `<root>/.dsh-herdr.json` read once: its settings and the hash of those very bytes; undefined when there is none. */
export function readRepoFileHashed(root: string): RepoFile | undefined {
  const file = join(root, REPO_SETTINGS_FILE);
  const buf = readBoundedSync(file, {
    maxBytes: MAX_BYTES,
    refuse: (why) => new DshError("CONFIG_INVALID", `${file} ${why}; make it a JSON file of the repository's settings`),
  });
  if (buf === undefined) return undefined;
  return { file, settings: parseRepoFile(file, buf), sha256: sha256Of(buf) };
}

function parseRepoFile(file: string, buf: Buffer): RepoSettings {
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

export interface ConsentedSettings {
  settings: RepoSettings;
  /** The .dsh-herdr.json whose settings were left out: its content is not the one the person trusted. */
  untrusted?: { file: string; state: Exclude<TrustState, "trusted">; settings: RepoSettings };
}

/**
 * The repository's settings a spawn may use: the .dsh-herdr.json's only while the home's trust book holds its
 * current content, config.json repos.<root> always (the person's own).
 */
export function consentedRepoSettings(root: string, config: Pick<Config, "repos">, home: string): ConsentedSettings {
  const own = ownSettings(root, config.repos) ?? {};
  const f = readRepoFileHashed(root);
  if (f === undefined || Object.keys(f.settings).length === 0)
    return { settings: mergeRepoSettings(f?.settings ?? {}, own) };
  const state = trustStateOf(readTrustBook(home), root, f.sha256);
  if (state === "trusted") return { settings: mergeRepoSettings(f.settings, own) };
  return { settings: mergeRepoSettings({}, own), untrusted: { file: f.file, state, settings: f.settings } };
}

/** The one line a spawn's warnings (and the CLI) carry for an untrusted .dsh-herdr.json. */
export function untrustedLine(root: string, u: NonNullable<ConsentedSettings["untrusted"]>): string {
  const what = [
    ...(u.settings.worktree?.setup !== undefined ? ["setup"] : []),
    ...(u.settings.checks?.length ? ["checks"] : []),
    ...(u.settings.worktree?.include?.length ? ["include"] : []),
  ];
  const why = u.state === "changed" ? "changed since you trusted it" : "not trusted";
  return `${u.file} is ${why}: its ${what.length ? what.join(", ") : "settings"} did not apply; review it, then \`dsh-herdr repo trust ${root}\``;
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
