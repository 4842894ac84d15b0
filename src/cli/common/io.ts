// Where the CLI writes: injected so commands can be run in-process by tests and by the demo.
export interface CliIo {
  out(text: string): void;
  err(text: string): void;
  /** stdout is a terminal: enables the spinner, the in-place watch table and the pager. */
  isTTY: boolean;
  /** stderr is a terminal (the spinner draws there); unset means the same as isTTY. */
  errIsTTY?: boolean;
  columns: number;
  env: NodeJS.ProcessEnv;
}

let pipeGuarded = false;

/**
 * The reader went away (`dsh-herdr show ID | head` once head has its lines): EPIPE on stdout or stderr is a quiet
 * exit 0, not an unhandled 'error' event and a stack. Other stream errors are left to node as before.
 */
function guardClosedPipes(): void {
  if (pipeGuarded) return;
  pipeGuarded = true;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (e: NodeJS.ErrnoException) => {
      if (e.code === "EPIPE") process.exit(0);
      throw e;
    });
  }
}

export function processIo(): CliIo {
  guardClosedPipes();
  return {
    out: (t) => void process.stdout.write(t),
    err: (t) => void process.stderr.write(t),
    isTTY: process.stdout.isTTY === true,
    errIsTTY: process.stderr.isTTY === true,
    columns: process.stdout.columns ?? 100,
    env: process.env,
  };
}

/** Print one JSON value on one line (machine output; --json everywhere). */
export function printJson(io: CliIo, value: unknown): void {
  io.out(JSON.stringify(value) + "\n");
}
