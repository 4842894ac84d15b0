// A JSONL file another process is writing (a pi session, a journal): only its complete lines. The file may exist and
// still be empty, or end in a line being written; parsing those threw "Unexpected end of JSON input" at random.
import { existsSync, readFileSync } from "node:fs";

export function completeJsonLines<T = Record<string, unknown>>(path: string): T[] {
  if (!existsSync(path)) return [];
  const lines = readFileSync(path, "utf8").split("\n");
  lines.pop(); // "" after the last newline, or a line not yet whole
  return lines.filter((l) => l.trim() !== "").map((l) => JSON.parse(l) as T);
}
