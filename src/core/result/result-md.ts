// result.md: YAML frontmatter (status, summary, tests, files) + a markdown body, read (src/core/result/result-md-read.ts) and
// written with the yaml library.
import { parse, stringify as stringifyYaml } from "yaml";
import { normalizeBody, type ParsedResultMd, readResultMd, YAML_OPTIONS } from "./result-md-read.js";

export * from "./result-md-read.js";

/** yaml's parse as result.md's frontmatter is read. */
export const parseYaml = (text: string): unknown => parse(text, YAML_OPTIONS);

/** result.md's text parsed: frontmatter meta, body, files, warnings. Never throws. */
export function parseResultMd(text: string, opts: { maxBytes?: number } = {}): ParsedResultMd {
  return readResultMd(text, parseYaml, opts);
}

export interface ResultMdFields {
  status: string;
  summary?: string;
  tests?: string;
  files?: string | string[];
}

/** The file parseResultMd reads back to the same meta and normalizeBody(body). */
export function renderResultMd(fields: ResultMdFields, body: string): string {
  // Values are trimmed because parse trims them: what goes out is exactly what comes back.
  const doc: Record<string, string> = { status: fields.status.trim() };
  if (fields.summary !== undefined) doc.summary = fields.summary.trim();
  if (fields.tests !== undefined) doc.tests = fields.tests.trim();
  if (fields.files !== undefined) {
    doc.files = Array.isArray(fields.files) ? fields.files.map((f) => f.trim()).join(", ") : fields.files.trim();
  }
  const yaml = stringifyYaml(doc, { lineWidth: 0 });
  const b = normalizeBody(body);
  return `---\n${yaml}---\n${b === "" ? "" : `\n${b}\n`}`;
}
