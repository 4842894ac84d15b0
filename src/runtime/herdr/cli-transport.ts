// The `herdr` CLI as a transport (for `--machine`): one process per request, argv only, JSON envelopes out.
// Output rules (reference/herdr.md §2): success prints the envelope on stdout; errors print it on stderr with
// exit 1; `pane read` prints raw text; send-text/send-keys/run print nothing.
// The CLI demands an exact protocol match with its server (0.8.x: 20, 0.9: 22): ping reads `herdr status --json`
// and refuses `compatible: false`, and a `protocol_mismatch` from any command is HERDR_PROTOCOL_MISMATCH, both
// naming the two protocols and the fix.
import { execa } from "execa";
import { DshError } from "../../core/errors.js";
import { parseEnvelope, protocolError } from "./envelope.js";
import { herdrRejection } from "./errors.js";
import { DEFAULT_TIMEOUT_MS, type HerdrResult, type HerdrTransport, MIN_PROTOCOL } from "./transport.js";

export interface CliTransportOptions {
  bin: string;
  machine?: string;
  session?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

type Params = Record<string, unknown>;
type Output = "envelope" | "text" | "none" | "status";

export class CliTransport implements HerdrTransport {
  readonly kind = "cli" as const;

  constructor(private readonly opts: CliTransportOptions) {}

  async request(method: string, params: Params, o: { timeoutMs?: number } = {}): Promise<HerdrResult> {
    const [args, output] = toArgv(method, params);
    const global = [
      ...(this.opts.machine !== undefined ? ["--machine", this.opts.machine] : []),
      ...(this.opts.session !== undefined ? ["--session", this.opts.session] : []),
    ];
    const timeout = o.timeoutMs ?? this.opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const run = await execa(this.opts.bin, [...global, ...args], {
      reject: false,
      timeout,
      stdin: "ignore",
      env: this.opts.env,
      extendEnv: this.opts.env === undefined,
    });
    if (run.timedOut) {
      throw new DshError(
        "TIMEOUT",
        `${this.opts.bin} ${args.slice(0, 2).join(" ")} did not finish within ${timeout} ms. Fix: check the Herdr server${this.machineHint()}`,
        { method },
      );
    }
    if (run.failed && run.exitCode === undefined) {
      throw new DshError(
        "HERDR_UNAVAILABLE",
        `Cannot run the Herdr CLI "${this.opts.bin}": ${run.originalMessage ?? run.shortMessage}. Fix: install herdr or set HERDR_BIN`,
        { method },
      );
    }
    const stdout = String(run.stdout ?? "");
    const stderr = String(run.stderr ?? "");
    if (run.exitCode !== 0) {
      const line = lastJsonLine(stderr) ?? lastJsonLine(stdout);
      if (line === undefined)
        throw protocolError(method, `exit ${run.exitCode} and no JSON error (${stderr.trim().slice(0, 120)})`);
      const err = (JSON.parse(line) as { error?: { code?: unknown; message?: unknown } }).error;
      if (typeof err?.code !== "string") throw protocolError(method, `exit ${run.exitCode} without an error envelope`);
      if (err.code === "protocol_mismatch")
        throw mismatchFromMessage(this.opts.bin, method, typeof err.message === "string" ? err.message : "");
      throw herdrRejection(method, err.code, typeof err.message === "string" ? err.message : "");
    }
    if (output === "none") return { type: "ok" };
    if (output === "text") return { type: "pane_read", read: { pane_id: params.pane_id, text: stdout } };
    const line = lastJsonLine(stdout);
    if (line === undefined) throw protocolError(method, `non-JSON output: ${stdout.trim().slice(0, 120)}`);
    if (output === "status") return statusToPong(line, method, this.opts.bin);
    const id = (JSON.parse(line) as { id?: unknown }).id;
    return parseEnvelope(line, typeof id === "string" ? id : "", method);
  }

  private machineHint(): string {
    return this.opts.machine !== undefined ? ` on machine "${this.opts.machine}" (herdr machine list)` : "";
  }
}

function lastJsonLine(text: string): string | undefined {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l.startsWith("{"));
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      JSON.parse(lines[i] as string);
      return lines[i];
    } catch {
      // keep looking
    }
  }
  return undefined;
}

/** HERDR_PROTOCOL_MISMATCH: the `herdr` CLI and its server speak different protocols. */
export function protocolMismatch(
  bin: string,
  cliProtocol: number | undefined,
  serverProtocol: number | undefined,
  method: string,
): DshError {
  const cli = cliProtocol ?? "?";
  const server = serverProtocol ?? "?";
  return new DshError(
    "HERDR_PROTOCOL_MISMATCH",
    `The herdr CLI "${bin}" speaks protocol ${cli} but its Herdr server speaks protocol ${server}, and the CLI works only with a server of its own protocol. Fix: install the herdr CLI that matches the server (herdr update, then restart the server; or set HERDR_BIN to a herdr of protocol ${server})`,
    {
      method,
      herdrCode: "protocol_mismatch",
      ...(cliProtocol !== undefined ? { cliProtocol } : {}),
      ...(serverProtocol !== undefined ? { protocol: serverProtocol, serverProtocol } : {}),
    },
  );
}

/** Herdr's text: "client protocol 22 is newer than server protocol 20; ..." (src/cli/protocol_guard.rs). */
function mismatchFromMessage(bin: string, method: string, message: string): DshError {
  const m = /client protocol (\d+) is (?:newer|older) than server protocol (\d+)/.exec(message);
  return protocolMismatch(bin, m ? Number(m[1]) : undefined, m ? Number(m[2]) : undefined, method);
}

/** `herdr status --json` ({client, server, update}) or `status server --json` (the server object) → a pong. */
function statusToPong(line: string, method: string, bin: string): HerdrResult {
  const s = JSON.parse(line) as {
    version?: unknown;
    protocol?: unknown;
    running?: unknown;
    compatible?: unknown;
    server?: Record<string, unknown>;
    client?: Record<string, unknown>;
  };
  const src = s.server ?? s;
  if (src.running === false)
    throw new DshError("HERDR_UNAVAILABLE", "The Herdr server is not running. Fix: start it (herdr server)");
  if (typeof src.protocol !== "number") throw protocolError(method, "a status without a protocol");
  // Too old a server is HERDR_TOO_OLD (the client's check), whatever the CLI thinks of it.
  if (src.compatible === false && src.protocol >= MIN_PROTOCOL) {
    const cli = typeof s.client?.protocol === "number" ? s.client.protocol : undefined;
    throw protocolMismatch(bin, cli, src.protocol, method);
  }
  return { type: "pong", version: String(src.version ?? "unknown"), protocol: src.protocol };
}

function envFlags(env: unknown): string[] {
  if (typeof env !== "object" || env === null) return [];
  return Object.entries(env as Record<string, string>).flatMap(([k, v]) => ["--env", `${k}=${v}`]);
}

function opt(flag: string, v: unknown): string[] {
  return v === undefined || v === null ? [] : [flag, String(v)];
}

function toArgv(method: string, p: Params): [string[], Output] {
  const s = (k: string): string => String(p[k]);
  switch (method) {
    case "ping":
      // The full status: the server's protocol and `compatible`, and the CLI's own protocol to name a mismatch.
      return [["status", "--json"], "status"];
    case "workspace.list":
      return [["workspace", "list"], "envelope"];
    case "workspace.create":
      return [
        ["workspace", "create", ...opt("--cwd", p.cwd), ...opt("--label", p.label), ...envFlags(p.env), "--no-focus"],
        "envelope",
      ];
    case "tab.create":
      return [
        [
          "tab",
          "create",
          ...opt("--workspace", p.workspace_id),
          ...opt("--cwd", p.cwd),
          ...opt("--label", p.label),
          ...envFlags(p.env),
          "--no-focus",
        ],
        "envelope",
      ];
    case "pane.split":
      return [
        [
          "pane",
          "split",
          s("target_pane_id"),
          "--direction",
          s("direction"),
          ...opt("--cwd", p.cwd),
          ...envFlags(p.env),
          "--no-focus",
        ],
        "envelope",
      ];
    case "pane.get":
      return [["pane", "get", s("pane_id")], "envelope"];
    case "pane.close":
      return [["pane", "close", s("pane_id")], "envelope"];
    case "pane.read":
      return [
        ["pane", "read", s("pane_id"), "--source", s("source").replace(/_/g, "-"), ...opt("--lines", p.lines)],
        "text",
      ];
    case "pane.send_text":
      return [["pane", "send-text", s("pane_id"), s("text")], "none"];
    case "pane.send_keys":
      return [["pane", "send-keys", s("pane_id"), ...(p.keys as string[])], "none"];
    case "pane.send_input":
      // `pane run` is send_input {text, keys:["Enter"]}; the only shape the runtime sends.
      return [["pane", "run", s("pane_id"), String(p.text ?? "")], "none"];
    case "agent.start":
      return [
        [
          "agent",
          "start",
          s("name"),
          "--kind",
          s("kind"),
          "--pane",
          s("pane_id"),
          ...opt("--timeout", p.timeout_ms),
          "--",
          ...((p.args as string[]) ?? []),
        ],
        "envelope",
      ];
    case "agent.get":
      return [["agent", "get", s("target")], "envelope"];
    case "agent.list":
      return [["agent", "list"], "envelope"];
    default:
      throw new DshError("INTERNAL", `The Herdr CLI transport has no mapping for ${method}`);
  }
}
