// repo trust|untrust|status [PATH]: consent for the commands a repository ships in its .dsh-herdr.json (setup,
// checks, include). Trusting records the sha256 of the file as it is now in <home>/repo-trust.json
// (src/store/repo-trust.ts) and prints what it lets run; a later change to the file needs a new trust. Read by the
// daemon at each spawn, so no restart is needed.
import type { Command } from "commander";
import { resolve } from "node:path";
import { DshError } from "../../core/errors.js";
import { requireRepoRoot } from "../../git/repo.js";
import type { RepoSettings } from "../../store/config.js";
import { ensureHome } from "../../store/home.js";
import { type ConsentedSettings, readRepoFileHashed, untrustedLine } from "../../store/repo-settings.js";
import { readTrustBook, setTrust, trustKey, trustStateOf } from "../../store/repo-trust.js";
import type { CliContext } from "../common/context.js";
import { printJson } from "../common/io.js";
import { examples, jsonOption } from "../common/options.js";

/** What the file makes the daemon do, one line each. */
function whatItRuns(s: RepoSettings): string[] {
  const out: string[] = [];
  if (s.worktree?.setup !== undefined) out.push(`setup: ${s.worktree.setup}`);
  for (const c of s.checks ?? []) out.push(`check: ${c}`);
  if (s.worktree?.include?.length) out.push(`include: ${s.worktree.include.join(" ")}`);
  if (s.worktree?.setupTimeoutMs !== undefined) out.push(`setup timeout: ${s.worktree.setupTimeoutMs} ms`);
  if (s.checkTimeoutMs !== undefined) out.push(`check timeout: ${s.checkTimeoutMs} ms`);
  return out;
}

async function rootOf(path: string | undefined): Promise<string> {
  return trustKey(await requireRepoRoot(resolve(path ?? process.cwd())));
}

/**
 * The line a spawn in `cwd` prints when the repository's .dsh-herdr.json is not trusted as it is now (undefined when
 * trusted, absent, or cwd is in no repository). Best effort: the daemon decides, and warns in the result.
 */
export async function untrustedNote(home: string, cwd: string): Promise<string | undefined> {
  try {
    const root = await rootOf(cwd);
    const f = readRepoFileHashed(root);
    if (f === undefined || Object.keys(f.settings).length === 0) return undefined;
    const state = trustStateOf(readTrustBook(home), root, f.sha256);
    if (state === "trusted") return undefined;
    const u: NonNullable<ConsentedSettings["untrusted"]> = { file: f.file, state, settings: f.settings };
    return untrustedLine(root, u);
  } catch {
    return undefined;
  }
}

export function registerRepoCommands(program: Command, ctx: CliContext): void {
  const repo = program
    .command("repo")
    .description("consent for a repository's .dsh-herdr.json: its setup, checks and includes run only once trusted");

  const trust = repo
    .command("trust")
    .description("trust the repository's .dsh-herdr.json as it is now: its setup, checks and includes apply to spawns")
    .argument("[path]", "a directory in the repository (default: the current directory)");
  jsonOption(trust);
  examples(trust, ["dsh-herdr repo trust", "dsh-herdr repo trust ~/src/app"]);
  trust.action(async (path: string | undefined, o: { json?: boolean }) => {
    const root = await rootOf(path);
    const f = readRepoFileHashed(root); // CONFIG_INVALID for a file that fails its schema: never trusted
    if (f === undefined)
      throw new DshError(
        "BAD_STATE",
        `${root} has no .dsh-herdr.json; nothing to trust (your own settings for it go in config.json repos)`,
      );
    await ensureHome(ctx.home);
    await setTrust(ctx.home, root, f.sha256);
    if (o.json) return printJson(ctx.io, { root, file: f.file, sha256: f.sha256, trusted: true, settings: f.settings });
    const runs = whatItRuns(f.settings);
    ctx.io.out(
      [
        `trusted ${f.file} (sha256 ${f.sha256.slice(0, 12)}); spawns in ${root} now apply:`,
        ...(runs.length ? runs.map((l) => `  ${l}`) : ["  (nothing: the file sets no command)"]),
        "a change to the file needs `dsh-herdr repo trust` again",
      ].join("\n") + "\n",
    );
  });

  const untrust = repo
    .command("untrust")
    .description("withdraw the trust: the repository's .dsh-herdr.json no longer applies")
    .argument("[path]", "a directory in the repository (default: the current directory)");
  jsonOption(untrust);
  untrust.action(async (path: string | undefined, o: { json?: boolean }) => {
    const root = await rootOf(path);
    const had = readTrustBook(ctx.home)[root] !== undefined ? await setTrust(ctx.home, root, undefined) : false;
    if (o.json) return printJson(ctx.io, { root, removed: had });
    ctx.io.out(had ? `${root}: no longer trusted\n` : `${root} was not trusted: nothing to withdraw\n`);
  });

  const status = repo
    .command("status")
    .description("whether the repository's .dsh-herdr.json is trusted as it is now, and what it would run")
    .argument("[path]", "a directory in the repository (default: the current directory)");
  jsonOption(status);
  status.action(async (path: string | undefined, o: { json?: boolean }) => {
    const root = await rootOf(path);
    const f = readRepoFileHashed(root);
    const book = readTrustBook(ctx.home);
    const state = f === undefined ? "none" : trustStateOf(book, root, f.sha256);
    if (o.json)
      return printJson(ctx.io, {
        root,
        state,
        ...(f ? { file: f.file, sha256: f.sha256, settings: f.settings } : {}),
        ...(book[root] ? { trustedAt: book[root]!.at } : {}),
      });
    if (f === undefined) return ctx.io.out(`${root} has no .dsh-herdr.json\n`);
    const head =
      state === "trusted"
        ? `${f.file}: trusted (since ${book[root]!.at}); spawns apply:`
        : state === "changed"
          ? `${f.file}: changed since you trusted it; spawns leave out (until \`dsh-herdr repo trust ${root}\`):`
          : `${f.file}: not trusted; spawns leave out (until \`dsh-herdr repo trust ${root}\`):`;
    const runs = whatItRuns(f.settings);
    ctx.io.out([head, ...(runs.length ? runs.map((l) => `  ${l}`) : ["  (nothing)"])].join("\n") + "\n");
  });
}
