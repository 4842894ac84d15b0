// The dsh-herdr command line: builds the commander tree, runs one command, maps errors to exit codes.
import { Command, CommanderError } from "commander";
import { asDshError, DshError } from "../core/errors.js";
import type { CliContext, DaemonConnection } from "./common/context.js";
import { EXIT, exitCodeForError } from "./common/exit-codes.js";
import { cliHome } from "./common/home.js";
import { packageVersion } from "./common/version.js";
import { type CliIo, processIo } from "./common/io.js";
import { fsError } from "../store/fsio.js";
import { safeText } from "./format/safe.js";

export { packageVersion };

type Register = (program: Command, ctx: CliContext) => void;

/**
 * Each command group's module, loaded only when its command runs: `--version`, `list` or `show` never load execa,
 * ajv or the runtimes (a CLI call at rest costs a bare node's start-up, not the whole tree's; bench/cli-startup.ts).
 * The order is the help's order.
 */
const COMMAND_GROUPS: ReadonlyArray<{ names: readonly string[]; load: () => Promise<Register> }> = [
  { names: ["spawn"], load: async () => (await import("./commands/spawn.js")).registerSpawnCommand },
  { names: ["list", "ls"], load: async () => (await import("./commands/list.js")).registerListCommand },
  { names: ["show", "result", "diff"], load: async () => (await import("./commands/read.js")).registerReadCommands },
  { names: ["verify"], load: async () => (await import("./commands/verify.js")).registerVerifyCommand },
  { names: ["check"], load: async () => (await import("./commands/check.js")).registerCheckCommand },
  { names: ["land"], load: async () => (await import("./commands/land.js")).registerLandCommand },
  { names: ["usage"], load: async () => (await import("./commands/usage.js")).registerUsageCommand },
  {
    names: ["wait", "respond", "abort", "close", "done"],
    load: async () => (await import("./commands/control.js")).registerControlCommands,
  },
  { names: ["logs", "open"], load: async () => (await import("./commands/panes.js")).registerPaneCommands },
  { names: ["watch"], load: async () => (await import("./commands/watch.js")).registerWatchCommand },
  { names: ["board"], load: async () => (await import("./commands/board.js")).registerBoardCommand },
  {
    names: ["schema", "config", "daemon"],
    load: async () => (await import("./commands/admin.js")).registerAdminCommands,
  },
  { names: ["gc"], load: async () => (await import("./commands/gc.js")).registerGcCommand },
  { names: ["machine"], load: async () => (await import("./commands/machines.js")).registerMachineCommands },
  { names: ["repo"], load: async () => (await import("./commands/repo-trust.js")).registerRepoCommands },
  { names: ["notify"], load: async () => (await import("./commands/notify.js")).registerNotifyCommands },
  { names: ["doctor"], load: async () => (await import("./commands/doctor.js")).registerDoctorCommand },
  { names: ["demo"], load: async () => (await import("./demo.js")).registerDemoCommand },
  {
    names: ["completion", "__complete"],
    load: async () => (await import("./commands/completion.js")).registerCompletionCommand,
  },
];

/** The command a command line names, when it is one of ours. */
function commandOf(args: readonly string[]): string | undefined {
  const first = args.find((a) => !a.startsWith("-"));
  return COMMAND_GROUPS.some((g) => first !== undefined && g.names.includes(first)) ? first : undefined;
}

/**
 * The groups a command line needs: none for a bare `--version`, the one group of a known command, every group
 * otherwise (help, a typo to suggest a command for, `completion`'s script of them all).
 */
export async function commandsFor(args: readonly string[]): Promise<Register[]> {
  const first = args.find((a) => !a.startsWith("-"));
  if (first === undefined && args.some((a) => a === "-V" || a === "--version")) return [];
  // `completion` writes a script of the whole command tree, so it needs every group.
  const group =
    first === undefined || first === "completion" ? undefined : COMMAND_GROUPS.find((g) => g.names.includes(first));
  return Promise.all((group ? [group] : COMMAND_GROUPS).map((g) => g.load()));
}

export interface RunOptions {
  io?: CliIo;
  connect?: (home: string, opts: { start?: boolean; env?: NodeJS.ProcessEnv }) => Promise<DaemonConnection>;
  signal?: AbortSignal;
}

/** Socket protocol fields as the CLI's flags, so a message the daemon words for a request names what a person typed. */
const FIELD_FLAGS: Record<string, string> = {
  timeoutMs: "--timeout",
  cwd: "--cwd",
  model: "--model",
  thinking: "--thinking",
  role: "--role",
  brief: "--brief",
  owner: "--owner",
  machine: "--machine",
  runtime: "--runtime",
  prompt: "the prompt",
  message: "the message",
  taskIds: "the task ids",
  taskId: "the task id",
  status: "--status",
  maxCost: "--max-cost",
  maxOutputTokens: "--max-output-tokens",
  maxTurns: "--max-turns",
};

/** A daemon BAD_PARAMS about `params.x` in CLI words, read from the error's data ({field, problem}), never its text. */
export function inCliWords(err: DshError): DshError {
  if (err.code !== "BAD_PARAMS") return err;
  const field = err.details?.["field"];
  const problem = err.details?.["problem"];
  const flag = typeof field === "string" ? FIELD_FLAGS[field] : undefined;
  if (!flag || typeof problem !== "string") return err;
  const rest = problem.replace(/^must be >= (\d+)$/, (_all, n: string) =>
    flag === "--timeout" ? `must be at least ${n} ms` : `must be >= ${n}`,
  );
  return new DshError("BAD_PARAMS", `${flag} ${rest}; see \`dsh-herdr <command> --help\``, { usage: true });
}

/**
 * A raw filesystem error about a path in the home (a command that wrote there without its own mapping): a full or
 * read-only home is HOME_UNWRITABLE naming the errno and the fix, never INTERNAL.
 */
export function homeErrorWords(e: unknown, home: string): unknown {
  const ne = e as NodeJS.ErrnoException | undefined;
  if (!(e instanceof Error) || typeof ne?.code !== "string" || typeof ne.path !== "string") return e;
  if (ne.path !== home && !ne.path.startsWith(home + "/")) return e;
  const err = fsError(e, `${ne.syscall ?? "write"} ${ne.path}`);
  return err.code === "HOME_UNWRITABLE" ? err : e;
}

/** Commander's own usage error text (`error: unknown option '--x'\n(Did you mean --y?)`) as one message. */
function usageMessage(text: string): string {
  return text
    .replace(/^error: /, "")
    .trim()
    .replace(/\s*\n\s*/g, " ");
}

/** Commander's own usage errors as the JSON error --json promises. */
function usageErrorJson(text: string): string {
  return JSON.stringify({ error: { code: "BAD_PARAMS", message: usageMessage(text) } }) + "\n";
}

/** Commander's own usage errors in the CLI's one error format, `dsh-herdr: CODE: message`, naming the help. */
function usageErrorLine(text: string, command: string | undefined): string {
  const help = command ? `dsh-herdr ${command} --help` : "dsh-herdr --help";
  return `dsh-herdr: BAD_PARAMS: ${usageMessage(text)}; see \`${help}\`\n`;
}

export async function buildProgram(
  ctx: CliContext,
  opts: { json?: boolean; args?: readonly string[] } = {},
): Promise<Command> {
  const program = new Command("dsh-herdr")
    .description(
      "Supervisor daemon for pi coding agents: delegate tasks to child pi agents and collect one AgentResult each",
    )
    .version(packageVersion(), "-V, --version")
    .exitOverride()
    .configureOutput({
      writeOut: (s) => ctx.io.out(s),
      writeErr: (s) => ctx.io.err(s),
      outputError: (s, write) => write(opts.json ? usageErrorJson(s) : usageErrorLine(s, commandOf(opts.args ?? []))),
    })
    .showSuggestionAfterError(true)
    .addHelpText(
      "after",
      `
Exit codes: 0 ok, 1 failed task or error, 2 usage, 3 timeout.
Home: $DSH_HERDR_HOME or ~/.dsh/herdr. Commands take --json for machine output (not completion). See docs/cli.md.

Examples:
  $ dsh-herdr demo                               # hermetic demo: real pi against a scripted model
  $ dsh-herdr spawn --isolated --prompt "add a test for parseDuration" --wait
  $ dsh-herdr watch
  $ dsh-herdr doctor`,
    );
  for (const register of await commandsFor(opts.args ?? ["help"])) register(program, ctx);
  return program;
}

function commanderExit(e: CommanderError): number {
  if (e.code === "commander.helpDisplayed" || e.code === "commander.version") return EXIT.ok;
  if (e.code === "commander.help" && e.exitCode === 0) return EXIT.ok;
  return EXIT.usage;
}

/** Run the CLI with node-style argv ([node, script, ...args]); resolves with the exit code. */
export async function run(argv: string[], opts: RunOptions = {}): Promise<number> {
  const io = opts.io ?? processIo();
  const controller = new AbortController();
  // First Ctrl+C stops the running command cleanly; a second one exits at once.
  const onSigint = () => (controller.signal.aborted ? process.exit(130) : controller.abort());
  if (!opts.signal) {
    process.on("SIGINT", onSigint);
    process.on("SIGTERM", onSigint);
  } else opts.signal.addEventListener("abort", onSigint, { once: true });
  const home = cliHome(io.env);
  const connect = opts.connect ?? (async (h, o) => (await import("./common/connect.js")).connectDaemon(h, o));
  const opened: DaemonConnection[] = [];
  const ctx: CliContext = {
    io,
    home,
    exitCode: EXIT.ok,
    signal: controller.signal,
    connect: async (o = {}) => {
      const c = await connect(home, { ...o, env: io.env });
      opened.push(c);
      return c;
    },
  };
  const wantsJson = argv.includes("--json");
  try {
    await (await buildProgram(ctx, { json: wantsJson, args: argv.slice(2) })).parseAsync(argv);
    return ctx.exitCode;
  } catch (e) {
    if (e instanceof CommanderError) return commanderExit(e);
    const err = inCliWords(asDshError(homeErrorWords(e, home)));
    if (wantsJson) io.err(JSON.stringify({ error: err.toJSON() }) + "\n");
    // An error's message can quote a child or a remote (stderr, a report): escaped for the terminal (safe.ts).
    else io.err(`dsh-herdr: ${err.code}: ${safeText(err.message)}\n`);
    return exitCodeForError(err);
  } finally {
    for (const c of opened) c.close();
    process.off("SIGINT", onSigint);
    process.off("SIGTERM", onSigint);
  }
}
