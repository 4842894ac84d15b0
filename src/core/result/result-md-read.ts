// result.md read without the YAML library bound in: the parser is given (src/core/result/result-md.ts gives yaml's), so a
// reader that meets only plain frontmatter, such as `dsh-herdr show`'s check of a stored result, never loads yaml.
// Parsing never throws: a malformed artifact becomes a warning and its whole text the body, so a child's mistake
// cannot break a harvest.
import type { ResultMeta } from "../types.js";

export const RESULT_MD_MAX_BYTES = 256 * 1024;
const META_KEYS = ["status", "summary", "tests", "files"] as const;

export interface ParsedResultMd {
  meta: ResultMeta;
  body: string;
  /** meta.files split on commas, trimmed, blanks dropped. */
  files?: string[];
  warnings: string[];
}

/** Cut to at most maxBytes of UTF-8 without splitting a character. */
function truncateUtf8(text: string, maxBytes: number): string {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= maxBytes) return text;
  let end = maxBytes;
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--; // back off continuation bytes
  return new TextDecoder().decode(bytes.subarray(0, end));
}

/** Drop leading blank lines and trailing whitespace: the body's canonical form (what render writes back). */
export function normalizeBody(body: string): string {
  return body.replace(/^(?:[ \t]*\r?\n)+/, "").trimEnd();
}

export function splitFiles(files: string | undefined): string[] | undefined {
  if (files === undefined) return undefined;
  const list = files
    .split(",")
    .map((f) => f.trim())
    .filter((f) => f !== "");
  return list;
}

function scalarText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean" || typeof v === "bigint") return String(v);
  return undefined;
}

function readMeta(doc: Record<string, unknown>, warnings: string[]): ResultMeta {
  const meta: ResultMeta = {};
  for (const key of META_KEYS) {
    const v = doc[key];
    if (v === undefined || v === null) continue;
    const s = scalarText(v);
    if (s !== undefined) {
      meta[key] = s.trim();
    } else if (key === "files" && Array.isArray(v) && v.every((x) => scalarText(x) !== undefined)) {
      meta.files = v.map((x) => scalarText(x)!.trim()).join(", "); // a YAML list is the obvious spelling too
    } else {
      warnings.push(
        `result.md frontmatter key "${key}" is not text (got ${Array.isArray(v) ? "a list" : typeof v}); write it as a single line of text`,
      );
    }
  }
  return meta;
}

export const YAML_OPTIONS = { schema: "core", uniqueKeys: false } as const;

const PLAIN_LINE = /^([A-Za-z][A-Za-z0-9_]*): +(.*?) *$/;
/**
 * A plain scalar YAML reads as this same text: no indicator first, no comment, no `: `. One that starts with a digit
 * must hold a space, so no core-schema number (`42`, `1.5`, `0x1F`) gets here.
 */
const PLAIN_VALUE = /^(?:[A-Za-z_(]|[0-9](?=.* ))[A-Za-z0-9 .,;()/_+='"!?-]*$/;
/** A double-quoted scalar with no escapes: its text is what is between the quotes. */
const QUOTED_VALUE = /^"([^"\\\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]*)"$/;
/** Plain words the YAML core schema reads as null or a boolean (as a key too: `null:` is the key ""). */
const CORE_WORD = /^(null|true|false)$/i;

/**
 * The frontmatter crew_report writes (`status: completed`, `summary: ...`) read without the YAML library, or
 * undefined for anything else, which the library reads. One `yaml` parse cost ~70 µs warm and several times that
 * cold, and the daemon parses one per settle (the N=100 burst's CPU profile put 66 ms there, a tenth of the burst).
 * Only `key: value` lines whose value YAML reads as exactly that text are taken; test/unit/result-md-fast.test.ts
 * checks every one against the library.
 */
export function plainFrontmatter(yamlText: string): Record<string, string> | undefined {
  const lines = yamlText.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  if (lines.length === 0) return undefined;
  const out: Record<string, string> = {};
  for (const raw of lines) {
    const m = PLAIN_LINE.exec(raw.endsWith("\r") ? raw.slice(0, -1) : raw);
    if (!m || Object.hasOwn(out, m[1]!) || CORE_WORD.test(m[1]!)) return undefined;
    const v = m[2]!;
    const quoted = QUOTED_VALUE.exec(v);
    if (quoted) out[m[1]!] = quoted[1]!;
    else if (PLAIN_VALUE.test(v) && !CORE_WORD.test(v)) out[m[1]!] = v;
    else return undefined;
  }
  return out;
}

/** A YAML document's value (yaml's parse with YAML_OPTIONS). */
export type ParseYaml = (text: string) => unknown;

/** parseResultMd with the YAML parser given; it is called only for frontmatter plainFrontmatter does not read. */
export function readResultMd(text: string, parseYaml: ParseYaml, opts: { maxBytes?: number } = {}): ParsedResultMd {
  const maxBytes = opts.maxBytes ?? RESULT_MD_MAX_BYTES;
  const warnings: string[] = [];
  if (text.includes("\u0000")) {
    return { meta: {}, body: "", warnings: ["result.md looks binary (NUL bytes); write it as UTF-8 markdown text"] };
  }
  let src = text.replace(/^\uFEFF/, "");
  const cut = truncateUtf8(src, maxBytes);
  if (cut.length < src.length) {
    warnings.push(
      `result.md is over ${maxBytes} bytes; the body was truncated. Keep the report short and put bulk output in files`,
    );
    src = cut;
  }
  const whole = (problem: string): ParsedResultMd => {
    warnings.push(`result.md frontmatter ${problem}; the whole file was read as the body`);
    return { meta: {}, body: normalizeBody(src), warnings };
  };

  const firstNl = src.indexOf("\n");
  const firstLine = (firstNl < 0 ? src : src.slice(0, firstNl)).trimEnd();
  if (firstLine !== "---") return { meta: {}, body: normalizeBody(src), warnings };

  const rest = firstNl < 0 ? "" : src.slice(firstNl + 1);
  const close = /^---[ \t]*\r?$/m.exec(rest);
  if (close === null) return whole("is not closed (no second --- line)");
  const yamlText = rest.slice(0, close.index);
  const afterClose = rest.slice(close.index + close[0].length);
  const body = normalizeBody(afterClose.startsWith("\n") ? afterClose.slice(1) : afterClose);

  let doc: unknown = plainFrontmatter(yamlText);
  try {
    doc ??= parseYaml(yamlText);
  } catch (e) {
    const msg = (e instanceof Error ? e.message : String(e)).split("\n")[0] ?? "";
    return whole(`is not valid YAML (${msg.slice(0, 160)})`);
  }
  if (doc === null || doc === undefined) return { meta: {}, body, warnings };
  if (typeof doc !== "object" || Array.isArray(doc)) {
    return whole(`is not a key: value map (got ${Array.isArray(doc) ? "a list" : typeof doc})`);
  }
  const meta = readMeta(doc as Record<string, unknown>, warnings);
  const files = splitFiles(meta.files);
  return files === undefined ? { meta, body, warnings } : { meta, body, files, warnings };
}
