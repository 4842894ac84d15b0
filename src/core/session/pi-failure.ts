// What a child's own output says about why pi could not start: pi prints one line and exits before it takes
// its prompt. Recognised lines get their own error code and pi's words; anything else stays the caller's.
import type { ErrorCode } from "../errors.js";

export interface PiStartFailure {
  code: ErrorCode;
  /** pi's own line, e.g. `Model "x" not found. Use --list-models to see available models.` */
  line: string;
}

const PATTERNS: { code: ErrorCode; re: RegExp }[] = [
  // 0.73.1 and 1.x alike: `Error: Model "nope/none" not found. Use --list-models to see available models.`
  { code: "MODEL_NOT_FOUND", re: /Model "[^"\n]*" not found\.[^\n]*/ },
];

/** Classify a child's output tail (screen text or stderr); undefined when it names no known start failure. */
export function classifyPiStartFailure(output: string): PiStartFailure | undefined {
  for (const { code, re } of PATTERNS) {
    const m = re.exec(output);
    if (m) return { code, line: m[0].trim() };
  }
  return undefined;
}
