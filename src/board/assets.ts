// The files the board serves, by a fixed list: its own page and three libraries from node_modules. No request names
// a path; a name not in this list is 404.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { DshError } from "../core/errors.js";

interface Asset {
  /** The package the file is in (found in node_modules up from here), or undefined for the board's own page. */
  pkg?: string;
  file: string;
  type: string;
}

const JS = "text/javascript; charset=utf-8";
const CSS = "text/css; charset=utf-8";

export const ASSETS: Readonly<Record<string, Asset>> = Object.freeze({
  "board.js": { file: "board.js", type: JS },
  "board.css": { file: "board.css", type: CSS },
  "marked.js": { pkg: "marked", file: "lib/marked.umd.js", type: JS },
  "purify.js": { pkg: "dompurify", file: "dist/purify.min.js", type: JS },
  // The slim bundle: syntax highlighting for the common languages, a third of the full one's size.
  "diff2html.js": { pkg: "diff2html", file: "bundles/js/diff2html-ui-slim.min.js", type: JS },
  "diff2html.css": { pkg: "diff2html", file: "bundles/css/diff2html.min.css", type: CSS },
});

/** The page's own files: src/board/page in the package (the build does not copy them). */
export function pageDir(): string {
  return findUp((d) => join(d, "src", "board", "page"), "board.js");
}

function packageDir(pkg: string): string {
  return findUp((d) => join(d, "node_modules", pkg), "package.json");
}

function findUp(candidate: (dir: string) => string, marker: string): string {
  let dir = import.meta.dirname;
  for (let i = 0; i < 8; i++) {
    const c = candidate(dir);
    if (existsSync(join(c, marker))) return c;
    const up = dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  throw new DshError("INTERNAL", `the board's files (${candidate("…")}) are missing; reinstall dsh-herdr`);
}

const cache = new Map<string, Buffer>();

/** An asset's bytes (read once), or undefined for a name not in the list. */
export async function readAsset(name: string): Promise<{ body: Buffer; type: string } | undefined> {
  if (!Object.hasOwn(ASSETS, name)) return undefined;
  const a = ASSETS[name]!;
  let body = cache.get(name);
  if (!body) {
    body = await readFile(join(a.pkg ? packageDir(a.pkg) : pageDir(), a.file));
    cache.set(name, body);
  }
  return { body, type: a.type };
}

export async function readPage(): Promise<Buffer> {
  return readFile(join(pageDir(), "index.html"));
}
