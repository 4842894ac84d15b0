// In-place redraw of a block of lines on a terminal with ANSI cursor movement: the block is rewritten, never
// appended, so a row that changes status changes where it stands.
export const ANSI = {
  up: (n: number) => (n > 0 ? `\x1b[${n}A` : ""),
  clearLine: "\x1b[2K",
  clearBelow: "\x1b[J",
  hideCursor: "\x1b[?25l",
  showCursor: "\x1b[?25h",
} as const;

export class LiveBlock {
  private drawn = 0;

  /** The bytes that replace the previous block with `lines`. */
  frame(lines: readonly string[]): string {
    let s = "\r" + ANSI.up(this.drawn);
    for (const l of lines) s += ANSI.clearLine + l + "\n";
    s += ANSI.clearBelow;
    this.drawn = lines.length;
    return s;
  }

  get height(): number {
    return this.drawn;
  }
}
