// The board's secret: a random token in the home (board.token, 0600), made on first use, replaced by `board --rotate`.
// The daemon reads it again when the file changes, so a rotation takes effect without a restart.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { writeAtomic } from "../store/fsio.js";

export const boardTokenPath = (home: string): string => join(home, "board.token");
/** Where the daemon writes the board's address (no token) once it listens. */
export const boardAddressPath = (home: string): string => join(home, "board.json");

const TOKEN_RE = /^[A-Za-z0-9_-]{32,128}$/;

function readToken(home: string): string | undefined {
  try {
    const t = readFileSync(boardTokenPath(home), "utf8").trim();
    return TOKEN_RE.test(t) ? t : undefined;
  } catch {
    return undefined;
  }
}

/** The token, made (0600) when the home has none. */
export async function ensureBoardToken(home: string): Promise<string> {
  return readToken(home) ?? (await rotateBoardToken(home));
}

/** A new token replaces the old one: every URL and cookie given out before stops working. */
export async function rotateBoardToken(home: string): Promise<string> {
  const t = randomBytes(32).toString("base64url");
  await writeAtomic(boardTokenPath(home), `${t}\n`, 0o600);
  return t;
}

/** The current token, read again only when the file's identity changes (a rotation). */
export class BoardToken {
  private key = "";
  private token: string | undefined;
  constructor(private readonly home: string) {}

  current(): string | undefined {
    let key = "";
    try {
      const st = statSync(boardTokenPath(this.home));
      key = `${st.ino}-${st.mtimeMs}-${st.size}`;
    } catch {
      /* no token: nothing matches */
    }
    if (key !== this.key) {
      this.key = key;
      this.token = key ? readToken(this.home) : undefined;
    }
    return this.token;
  }

  matches(given: string | undefined): boolean {
    const t = this.current();
    if (!t || given === undefined || given.length !== t.length) return false;
    return timingSafeEqual(Buffer.from(given), Buffer.from(t));
  }
}
