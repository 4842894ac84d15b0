// pi --mode rpc framing: one JSON object per line, split on "\n" only (not readline: it also splits on
// U+2028/U+2029, which may appear inside JSON strings), a trailing "\r" stripped.
import { StringDecoder } from "node:string_decoder";

export type PiRpcCommand =
  | { type: "prompt"; message: string; streamingBehavior?: "steer" | "followUp"; id?: string }
  | { type: "steer"; message: string; id?: string }
  | { type: "follow_up"; message: string; id?: string }
  | { type: "abort"; id?: string }
  | { type: "get_state"; id?: string }
  | { type: "set_auto_retry"; enabled: boolean; id?: string }
  | { type: "abort_retry"; id?: string }
  | { type: "get_last_assistant_text"; id?: string };

/** One command as a line for pi's stdin. */
export function rpcLine(cmd: PiRpcCommand): string {
  return JSON.stringify(cmd) + "\n";
}

/** Feeds stdout chunks in and calls onMessage per complete JSON line; a non-JSON line goes to onBadLine. */
export class RpcLineReader {
  private buf = "";
  // A chunk may end inside a multi-byte character.
  private readonly decoder = new StringDecoder("utf8");

  constructor(
    private readonly onMessage: (msg: Record<string, unknown>) => void,
    private readonly onBadLine: (line: string) => void = () => undefined,
  ) {}

  push(chunk: string | Buffer): void {
    this.buf += typeof chunk === "string" ? chunk : this.decoder.write(chunk);
    let i: number;
    while ((i = this.buf.indexOf("\n")) >= 0) {
      let line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + 1);
      if (line.endsWith("\r")) line = line.slice(0, -1);
      if (line.trim() === "") continue;
      let msg: unknown;
      try {
        msg = JSON.parse(line);
      } catch {
        this.onBadLine(line);
        continue;
      }
      if (msg && typeof msg === "object" && !Array.isArray(msg)) this.onMessage(msg as Record<string, unknown>);
      else this.onBadLine(line);
    }
  }
}
