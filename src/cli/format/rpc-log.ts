// A headless child's output as a person reads it: `pi --mode rpc` writes one JSON event per line (a streaming update
// repeats the whole partial message, several KB a line); `logs` shows what happened instead: the prompt's first line,
// the assistant's text, each tool call and how it ended, retries, compaction and errors. `logs --raw` prints the
// events themselves. Lines that are not JSON (pi's own warnings) are kept as they are.

const MAX_ARG = 160;

function clip(s: string, n = MAX_ARG): string {
  const one = s.replace(/\s+/g, " ").trim();
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((c): c is { type: string; text: string } => c?.type === "text" && typeof c.text === "string")
    .map((c) => c.text)
    .join("\n");
}

/** A tool call in one line: the argument that says what it does (path, command), else its JSON. */
function callLine(name: string, args: unknown): string {
  const a = (args ?? {}) as Record<string, unknown>;
  const pick = ["command", "path", "file_path", "pattern", "url"].find((k) => typeof a[k] === "string");
  if (pick !== undefined) return `→ ${name} ${clip(String(a[pick]))}`;
  const json = JSON.stringify(args ?? {});
  return `→ ${name} ${clip(json === "{}" ? "" : json)}`.trimEnd();
}

function eventLines(e: Record<string, unknown>): string[] {
  const type = e["type"];
  if (type === "message_end") {
    const m = (e["message"] ?? {}) as Record<string, unknown>;
    if (m["role"] === "user") {
      const lines = textOf(m["content"]).split("\n");
      const more = lines.length > 1 ? `  (+${lines.length - 1} lines)` : "";
      return [`› ${clip(lines[0] ?? "", 200)}${more}`];
    }
    if (m["role"] !== "assistant") return [];
    const out: string[] = [];
    for (const c of Array.isArray(m["content"]) ? (m["content"] as Record<string, unknown>[]) : []) {
      if (c?.["type"] === "text" && typeof c["text"] === "string" && c["text"].trim() !== "")
        out.push(...c["text"].replace(/\s+$/, "").split("\n"));
      else if (c?.["type"] === "toolCall") out.push(callLine(String(c["name"] ?? "?"), c["arguments"]));
    }
    const stop = m["stopReason"];
    if (stop === "error" || stop === "aborted")
      out.push(`! ${stop}${typeof m["errorMessage"] === "string" ? `: ${clip(m["errorMessage"], 300)}` : ""}`);
    return out;
  }
  if (type === "tool_execution_end") {
    const name = String(e["toolName"] ?? "?");
    const r = (e["result"] ?? {}) as Record<string, unknown>;
    if (e["isError"] === true) return [`  ✗ ${name}: ${clip(textOf(r["content"]).split("\n")[0] ?? "", 300)}`];
    return [`  ✓ ${name}`];
  }
  if (type === "auto_retry_start")
    return [
      `! retry ${String(e["attempt"] ?? "?")}/${String(e["maxAttempts"] ?? "?")}: ${clip(String(e["errorMessage"] ?? ""), 300)}`,
    ];
  if (type === "auto_retry_end" && e["success"] === false)
    return [`! gave up after ${String(e["attempt"] ?? "?")} attempts: ${clip(String(e["finalError"] ?? ""), 300)}`];
  if (type === "compaction_start") return [`· compacting the context (${String(e["reason"] ?? "")})`];
  if (type === "extension_error")
    return [`! extension error (${String(e["event"] ?? "?")}): ${clip(String(e["error"] ?? ""), 300)}`];
  if (type === "response" && e["success"] === false)
    return [`! ${String(e["command"] ?? "command")} failed: ${clip(String(e["error"] ?? ""), 300)}`];
  if (type === "agent_end") return ["· end of the run"];
  return [];
}

/** The readable lines of an rpc output (whole lines only: a partial last line is left for the next read). */
export function renderRpcLog(text: string): string[] {
  const out: string[] = [];
  const lines = text.split("\n");
  if (!text.endsWith("\n")) lines.pop(); // still being written
  for (const line of lines) {
    if (line.trim() === "") continue;
    let e: unknown;
    try {
      e = JSON.parse(line);
    } catch {
      out.push(line);
      continue;
    }
    if (e !== null && typeof e === "object" && !Array.isArray(e)) out.push(...eventLines(e as Record<string, unknown>));
    else out.push(line);
  }
  return out;
}
