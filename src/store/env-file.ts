// The daemon's environment file, `<home>/env`: KEY=value lines the daemon applies to its own environment at start
// (src/daemon/main.ts), which its children inherit, and which `daemon install-unit` names in the unit's
// EnvironmentFile=. systemd and the daemon must read it alike, so the grammar is a small subset that systemd's
// EnvironmentFile= and a POSIX shell (`set -a; . ~/.dsh/herdr/env`) both read the same way:
//
//   line    = blank | comment | NAME "=" value          (leading blanks allowed; nothing else)
//   comment = first non-blank character "#" or ";"
//   NAME    = [A-Za-z_][A-Za-z0-9_]*                    (no blanks around "=")
//   value   = "" | bare | single | double, then only trailing blanks
//   bare    = [A-Za-z0-9_@%+=:,./-]+                    (no quoting, no expansion in either reader)
//   single  = "'" any character but "'" "'"
//   double  = '"' (any character but '"' "\" "$" "`"  |  "\" followed by one of '"' "\" "$" "`") '"'
//
// A value never spans lines (no newline, CR or NUL in a value). A later line for the same NAME wins (as in both
// readers). Anything else is CONFIG_INVALID naming the line: a line the two readers might read differently is
// refused rather than guessed. `daemon env set` writes values in this grammar only (bare, else single-quoted, else
// double-quoted), keeps comments and order, and the file stays mode 0600 (it holds API keys).
import { chmodSync, statSync } from "node:fs";
import { join } from "node:path";
import { DshError } from "../core/errors.js";
import { fsError, readBoundedSync, writeAtomic } from "./fsio.js";

export const ENV_FILE_MAX_BYTES = 1024 * 1024;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const BARE = /^[A-Za-z0-9_@%+=:,./-]+$/;

export function envFilePath(home: string): string {
  return join(home, "env");
}

export function isEnvName(s: string): boolean {
  return NAME.test(s);
}

/** One line of the file: an assignment, or a line kept as it is (blank, comment). */
type EnvLine = { kind: "set"; name: string; value: string; raw: string } | { kind: "keep"; raw: string };

function invalid(file: string, lineNo: number, why: string): DshError {
  return new DshError(
    "CONFIG_INVALID",
    `${file} line ${lineNo}: ${why}; each line is NAME=value (value bare, 'single-quoted' or "double-quoted", on one line). Fix the line, or remove it and use \`dsh-herdr daemon env set NAME=value\``,
  );
}

function parseValue(text: string, file: string, lineNo: number): string {
  const rest = (s: string) => {
    if (!/^[ \t]*$/.test(s)) throw invalid(file, lineNo, "text after the closing quote");
  };
  if (text === "") return "";
  if (text.startsWith("'")) {
    const end = text.indexOf("'", 1);
    if (end < 0) throw invalid(file, lineNo, "a single quote that is not closed on the same line");
    rest(text.slice(end + 1));
    return text.slice(1, end);
  }
  if (text.startsWith('"')) {
    let out = "";
    for (let i = 1; i < text.length; i++) {
      const c = text[i]!;
      if (c === '"') {
        rest(text.slice(i + 1));
        return out;
      }
      if (c === "\\") {
        const n = text[i + 1];
        if (n === undefined || !'"\\$`'.includes(n))
          throw invalid(file, lineNo, 'a backslash in double quotes escapes only " \\ $ or `');
        out += n;
        i++;
        continue;
      }
      if (c === "$" || c === "`")
        throw invalid(file, lineNo, `an unescaped ${c} in double quotes (the shell expands it)`);
      out += c;
    }
    throw invalid(file, lineNo, "a double quote that is not closed on the same line");
  }
  const bare = text.replace(/[ \t]+$/, "");
  if (!BARE.test(bare))
    throw invalid(
      file,
      lineNo,
      "an unquoted value with characters systemd and the shell read differently (spaces, quotes, \\, $, ~, #...): quote it",
    );
  return bare;
}

function parseLines(text: string, file: string): EnvLine[] {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  return lines.map((raw, i): EnvLine => {
    const n = i + 1;
    if (raw.includes("\r") || raw.includes("\0")) throw invalid(file, n, "a carriage return or NUL in the line");
    const t = raw.replace(/^[ \t]+/, "");
    if (t === "" || t.startsWith("#") || t.startsWith(";")) return { kind: "keep", raw };
    const eq = t.indexOf("=");
    if (eq < 0) throw invalid(file, n, "no = in the line");
    const name = t.slice(0, eq);
    if (!NAME.test(name)) throw invalid(file, n, `${JSON.stringify(name)} is not a variable name`);
    return { kind: "set", name, value: parseValue(t.slice(eq + 1), file, n), raw };
  });
}

/** Parse the file's text: the variables in order of their last assignment. Throws CONFIG_INVALID naming the line. */
export function parseEnvFile(text: string, file = "env"): Map<string, string> {
  const out = new Map<string, string>();
  for (const l of parseLines(text, file)) {
    if (l.kind !== "set") continue;
    out.delete(l.name); // a later assignment wins and moves to its place
    out.set(l.name, l.value);
  }
  return out;
}

/** A value as this grammar writes it. Throws BAD_PARAMS for a value no line can hold. */
export function formatEnvValue(value: string): string {
  if (/[\n\r\0]/.test(value))
    throw new DshError("BAD_PARAMS", "a value in the env file cannot hold a newline, carriage return or NUL", {
      usage: true,
    });
  if (value === "") return "";
  if (BARE.test(value)) return value;
  if (!value.includes("'")) return `'${value}'`;
  return `"${value.replace(/(["\\$`])/g, "\\$1")}"`;
}

export interface EnvFileState {
  path: string;
  /** Undefined when there is no file. */
  vars?: Map<string, string>;
  /** The file's permission bits, when it exists. */
  mode?: number;
}

function readText(path: string): string | undefined {
  return readBoundedSync(path, {
    maxBytes: ENV_FILE_MAX_BYTES,
    refuse: (why) =>
      new DshError("CONFIG_INVALID", `${path} ${why}; make it a text file of NAME=value lines, or delete it`),
  })?.toString("utf8");
}

/** The home's env file: its variables (none when absent) and mode. Throws CONFIG_INVALID for a bad file. */
export function readEnvFile(home: string): EnvFileState {
  const path = envFilePath(home);
  const text = readText(path);
  if (text === undefined) return { path };
  let mode: number | undefined;
  try {
    mode = statSync(path).mode & 0o777;
  } catch {
    // gone between the read and the stat: the read's content stands
  }
  return { path, vars: parseEnvFile(text, path), ...(mode !== undefined ? { mode } : {}) };
}

/**
 * Set (a string) or remove (undefined) variables in the home's env file, keeping its comments and the order of its
 * lines; a new variable goes at the end. The file is rewritten atomically, mode 0600.
 */
export async function updateEnvFile(home: string, changes: ReadonlyMap<string, string | undefined>): Promise<void> {
  const path = envFilePath(home);
  for (const [name, value] of changes) {
    if (!NAME.test(name))
      throw new DshError("BAD_PARAMS", `${JSON.stringify(name)} is not a variable name (letters, digits, _)`, {
        usage: true,
      });
    if (value !== undefined) formatEnvValue(value);
  }
  const lines = parseLines(readText(path) ?? "", path);
  const done = new Set<string>();
  const out: string[] = [];
  for (const l of lines) {
    if (l.kind === "keep" || !changes.has(l.name)) {
      out.push(l.raw);
      continue;
    }
    const v = changes.get(l.name);
    if (v === undefined || done.has(l.name)) continue; // removed, or a duplicate of a line already rewritten
    out.push(`${l.name}=${formatEnvValue(v)}`);
    done.add(l.name);
  }
  for (const [name, v] of changes) if (v !== undefined && !done.has(name)) out.push(`${name}=${formatEnvValue(v)}`);
  try {
    await writeAtomic(path, out.length ? out.join("\n") + "\n" : "", 0o600);
    chmodSync(path, 0o600); // writeAtomic's mode is filtered by the umask
  } catch (e) {
    throw fsError(e, `write ${path}`);
  }
}
