// `watch` on a terminal with a keyboard (stdin and stdout both terminals): act on the selected row. ↑/↓ or j/k select
// a task; enter opens it (its pane, as `dsh-herdr open`; a headless task's card); d shows its diff; r asks for a
// message and responds (a running task is steered, a settled one gets a new cycle); a aborts, c closes, l lands it,
// each after a y/N; q (or Ctrl+C) quits. Text goes through $DSH_HERDR_PAGER / $PAGER (default less) or, with `cat`
// or an empty pager, a panel inside the watch (↑/↓ scroll, space a page, q back). Every string a child wrote is
// neutralised before it reaches the terminal (src/cli/format/safe.ts).
import { execFile, spawn } from "node:child_process";
import { join } from "node:path";
import { emitKeypressEvents } from "node:readline";
import { promisify } from "node:util";
import { isDshError } from "../../core/errors.js";
import type { CliContext, DaemonConnection } from "../common/context.js";
import { renderCard } from "../format/card.js";
import { colorEnabled } from "../format/color.js";
import { ANSI } from "../format/live.js";
import { safeLine, safeText } from "../format/safe.js";
import { questionLine, type TaskRow } from "../format/table.js";
import { textWidth, truncate } from "../format/text.js";
import { readResult } from "../common/task-files.js";
import { respondSaid } from "./control.js";
import { landLine } from "./land.js";

/** This package's own CLI, run for `open` (a pane takes the terminal) and `diff --json` (the patch as `diff` finds it). */
const BIN = join(import.meta.dirname, "..", "..", "..", "..", "bin", "dsh-herdr");

interface Key {
  name?: string;
  ctrl?: boolean;
  meta?: boolean;
  sequence?: string;
}

type Mode =
  | { kind: "table" }
  | { kind: "input"; prompt: string; text: string; submit: (text: string) => Promise<string> }
  | { kind: "confirm"; question: string; run: () => Promise<string> }
  | { kind: "panel"; title: string; lines: string[]; top: number };

export interface WatchKeysOptions {
  ctx: CliContext;
  conn: DaemonConnection;
  /** The rows as the table shows them, in order. */
  rows(): TaskRow[];
  /** Draw again (the selection, the footer or a panel changed). */
  redraw(): void;
  /** The screen was cleared (a pane or a pager had it): the next draw starts a new block. */
  cleared(): void;
  quit(): void;
}

export const KEYS_HELP = "↑↓/jk select · enter open · d diff · r respond · a abort · c close · l land · q quit";
/** The key help, shorter and shorter for narrow terminals: the first that fits is shown, and each keeps `q quit`. */
const KEYS_HELP_SHORTER = [
  KEYS_HELP,
  "↑↓/jk · enter open · d diff · r respond · a abort · c close · l land · q quit",
  "↑↓ enter · d diff · r respond · a abort · c close · l land · q quit",
  "↑↓ enter d r a c l · q quit",
  "q quit",
];

/** The longest key help that fits `width` columns. */
export function keysHelp(width: number): string {
  return truncate(KEYS_HELP_SHORTER.find((h) => textWidth(h) <= width) ?? "q quit", width);
}

export class WatchKeys {
  private mode: Mode = { kind: "table" };
  private selectedId: string | undefined;
  private message = "";
  private busy = false;
  private attached = false;
  /** A pane or a pager has the terminal: the watch draws nothing meanwhile. */
  suspended = false;
  private readonly onKeypress = (str: string | undefined, key: Key | undefined) => void this.key(str, key ?? {});

  constructor(private readonly o: WatchKeysOptions) {}

  /** Raw keys from the terminal from now on. */
  start(): void {
    emitKeypressEvents(process.stdin);
    this.attach();
  }

  /** The terminal as it was (cooked, no listener, stdin paused so the process may exit). */
  stop(): void {
    this.detach();
  }

  private attach(): void {
    if (this.attached) return;
    this.attached = true;
    process.stdin.setRawMode?.(true);
    process.stdin.on("keypress", this.onKeypress);
    process.stdin.resume();
  }

  private detach(): void {
    if (!this.attached) return;
    this.attached = false;
    process.stdin.off("keypress", this.onKeypress);
    process.stdin.setRawMode?.(false);
    process.stdin.pause();
  }

  /** The selected row (the first when none was picked, or the picked one is gone). */
  selected(): TaskRow | undefined {
    const rows = this.o.rows();
    const row = rows.find((r) => r.taskId === this.selectedId) ?? rows[0];
    this.selectedId = row?.taskId;
    return row;
  }

  /** A panel instead of the table (a card or a diff, when no pager shows it). */
  panel(width: number, height: number): string[] | undefined {
    if (this.mode.kind !== "panel") return undefined;
    const m = this.mode;
    const room = Math.max(3, height - 2);
    m.top = Math.max(0, Math.min(m.top, m.lines.length - room));
    const shown = m.lines.slice(m.top, m.top + room).map((l) => truncate(l, width));
    const last = Math.min(m.lines.length, m.top + room);
    return [
      truncate(`${m.title} · lines ${m.top + 1}–${last} of ${m.lines.length}`, width),
      ...shown,
      truncate("↑↓/jk scroll · space page · b back a page · q back to the table", width),
    ];
  }

  /** The table with the selected row in reverse video (header first, one line per row). */
  highlight(table: string[], rows: TaskRow[]): string[] {
    const sel = this.selected();
    const i = sel ? rows.findIndex((r) => r.taskId === sel.taskId) : -1;
    if (i < 0 || table[i + 1] === undefined) return table;
    return table.map((line, n) => (n === i + 1 ? `\x1b[7m${line}\x1b[27m` : line));
  }

  /** The two footer lines: the status (and the selection or the last action's outcome), and the keys or the prompt. */
  footer(status: string, width: number): string[] {
    const sel = this.selected();
    const what = this.message || (sel ? `› ${sel.taskId} ${safeLine(sel.agent.name)} (${sel.status})` : "");
    const first = truncate(what ? `${status} · ${what}` : status, width);
    const m = this.mode;
    if (m.kind === "input")
      return [first, truncate(`${m.prompt}${safeLine(m.text)}█  (enter sends, esc cancels)`, width)];
    if (m.kind === "confirm") return [first, truncate(`${m.question} [y/N]`, width)];
    // A blocked task waits for its owner: what it asks, under the table, when it is the one selected.
    const question = sel ? questionLine(sel, width) : undefined;
    return [first, ...(question ? [question] : []), keysHelp(width)];
  }

  private say(text: string): void {
    this.message = safeLine(text.trim());
  }

  private async key(str: string | undefined, key: Key): Promise<void> {
    const m = this.mode;
    if (key.ctrl && key.name === "c" && m.kind === "table") return this.o.quit();
    if (this.busy) return;
    if (m.kind === "input") return this.inputKey(m, str, key);
    if (m.kind === "confirm") {
      this.mode = { kind: "table" };
      if (str === "y" || str === "Y") await this.act(m.run);
      else this.say("nothing done");
      return this.o.redraw();
    }
    if (m.kind === "panel") return this.panelKey(m, str, key);
    switch (key.name ?? str) {
      case "up":
      case "k":
        return this.move(-1);
      case "down":
      case "j":
        return this.move(1);
      case "q":
        return this.o.quit();
      case "escape":
        this.message = "";
        return this.o.redraw();
      case "return":
      case "enter":
        return this.withSelected((t) => this.open(t));
      case "d":
        return this.withSelected((t) => this.diff(t));
      case "r":
        return this.withSelected((t) => {
          this.mode = {
            kind: "input",
            prompt: `respond to ${t.taskId}: `,
            text: "",
            submit: async (text) => {
              const r = await this.o.conn.request("task.respond", {
                taskId: t.taskId,
                message: text,
                steer: true,
              });
              return `${r.taskId}: ${respondSaid(r)}`;
            },
          };
          this.o.redraw();
        });
      case "a":
        return this.withSelected((t) =>
          this.ask(`abort ${t.taskId} (${t.status})?`, async () => {
            const r = await this.o.conn.request("task.abort", { taskIds: [t.taskId] });
            return r.aborted_ids.length > 0 ? `aborted ${t.taskId}` : `${t.taskId}: nothing to abort (not open)`;
          }),
        );
      case "c":
        return this.withSelected((t) =>
          this.ask(`close ${t.taskId} (${t.status})?`, async () => {
            await this.o.conn.request("task.close", { taskId: t.taskId });
            return `closed ${t.taskId}`;
          }),
        );
      case "l":
        return this.withSelected((t) =>
          this.ask(`land ${t.taskId}'s work onto its base branch?`, async () => {
            const r = await this.o.conn.request(
              "task.land",
              { taskIds: [t.taskId], strategy: "auto" },
              { timeoutMs: 6 * 60 * 60_000 },
            );
            return r.results.map((x) => landLine(x)).join(" ");
          }),
        );
      default:
        return;
    }
  }

  private move(by: number): void {
    const rows = this.o.rows();
    if (rows.length === 0) return;
    const i = Math.max(
      0,
      rows.findIndex((r) => r.taskId === this.selected()?.taskId),
    );
    this.selectedId = rows[Math.max(0, Math.min(rows.length - 1, i + by))]!.taskId;
    this.message = "";
    this.o.redraw();
  }

  private withSelected(fn: (t: TaskRow) => unknown): void {
    const t = this.selected();
    if (!t) {
      this.say("no task to act on");
      return this.o.redraw();
    }
    void fn(t);
  }

  private ask(question: string, run: () => Promise<string>): void {
    this.mode = { kind: "confirm", question, run };
    this.o.redraw();
  }

  /** Run an action with the footer saying so; its outcome (or error, by code) becomes the message. */
  private async act(run: () => Promise<string>): Promise<void> {
    this.busy = true;
    this.say("…");
    this.o.redraw();
    try {
      this.say(await run());
    } catch (e) {
      this.say(isDshError(e) ? `${e.code}: ${e.message}` : String(e));
    } finally {
      this.busy = false;
    }
  }

  private async inputKey(m: Extract<Mode, { kind: "input" }>, str: string | undefined, key: Key): Promise<void> {
    if (key.name === "escape" || (key.ctrl && key.name === "c")) {
      this.mode = { kind: "table" };
      this.say("nothing sent");
    } else if (key.name === "return" || key.name === "enter") {
      if (m.text.trim() === "") return;
      this.mode = { kind: "table" };
      await this.act(() => m.submit(m.text));
    } else if (key.name === "backspace") m.text = m.text.slice(0, -1);
    else if (key.ctrl && key.name === "u") m.text = "";
    else if (str && !key.ctrl && !key.meta && !/[\u0000-\u001f\u007f]/.test(str)) m.text += str;
    this.o.redraw();
  }

  private panelKey(m: Extract<Mode, { kind: "panel" }>, str: string | undefined, key: Key): void {
    const page = Math.max(1, (process.stdout.rows ?? 24) - 4);
    switch (key.name ?? str) {
      case "up":
      case "k":
        m.top = Math.max(0, m.top - 1);
        break;
      case "down":
      case "j":
        m.top += 1;
        break;
      case "space":
      case "pagedown":
        m.top += page;
        break;
      case "b":
      case "pageup":
        m.top = Math.max(0, m.top - page);
        break;
      case "q":
      case "escape":
      case "return":
        this.mode = { kind: "table" };
        break;
      default:
        if (key.ctrl && key.name === "c") this.mode = { kind: "table" };
        else return;
    }
    this.o.redraw();
  }

  /** enter: a pane (tmux, Herdr, another machine) through `dsh-herdr open`; a headless task's card. */
  private async open(t: TaskRow): Promise<void> {
    // No pane to open (here or on another machine, whose result.json has a copy here): the card.
    if (t.agent.runtime === "headless") {
      const r = readResult(this.o.ctx.home, t.taskId);
      const color = colorEnabled(this.o.ctx.io.env, true);
      return this.show(`${t.taskId} ${t.agent.name}`, renderCard(r, undefined, { color }));
    }
    // The pane takes the terminal (tmux attach, ssh -t) until it is left (detached, quit): then the watch is back.
    const code = await this.suspend(
      () =>
        new Promise<number>((resolve) => {
          const child = spawn(process.execPath, [BIN, "open", t.taskId], {
            stdio: "inherit",
            env: { ...this.o.ctx.io.env, DSH_HERDR_HOME: this.o.ctx.home },
          });
          child.on("error", () => resolve(1));
          child.on("exit", (c) => resolve(c ?? 1));
        }),
    );
    this.say(
      code === 0
        ? `back from ${t.taskId}'s pane`
        : `open ${t.taskId} failed (exit ${code}): try dsh-herdr open ${t.taskId}`,
    );
    this.o.redraw();
  }

  /** d: the patch as `dsh-herdr diff` finds it (a task on another machine: its local copy). */
  private async diff(t: TaskRow): Promise<void> {
    this.say("…");
    this.o.redraw();
    let patch = "";
    try {
      const { stdout } = await promisify(execFile)(process.execPath, [BIN, "diff", t.taskId, "--json"], {
        env: { ...this.o.ctx.io.env, DSH_HERDR_HOME: this.o.ctx.home },
        maxBuffer: 256 * 1024 * 1024,
      });
      patch = (JSON.parse(stdout) as { patch: string }).patch;
    } catch (e) {
      this.say(`diff ${t.taskId}: ${String((e as { stderr?: string }).stderr || e).split("\n")[0]}`);
      return this.o.redraw();
    }
    if (patch === "") {
      this.say(`${t.taskId} has no diff (no changes since its baseline, or not harvested yet)`);
      return this.o.redraw();
    }
    this.message = "";
    return this.show(`diff ${t.taskId}`, safeText(patch));
  }

  /** Long text: the pager (it takes the terminal), or a panel in the watch. */
  private async show(title: string, text: string): Promise<void> {
    const env = this.o.ctx.io.env;
    const pager = env.DSH_HERDR_PAGER ?? env.PAGER ?? "less";
    if (pager === "" || pager === "cat") {
      const lines = text.replace(/\t/g, "    ").replace(/\n$/, "").split("\n");
      this.mode = { kind: "panel", title, lines, top: 0 };
      return this.o.redraw();
    }
    // less without F: a short text must not flash by (the watch clears the screen when it comes back).
    const less = (env.LESS ?? "R").replace(/F/g, "") || "R";
    await this.suspend(
      () =>
        new Promise<void>((resolve) => {
          const child = spawn(pager, {
            shell: true,
            stdio: ["pipe", "inherit", "inherit"],
            env: { ...env, LESS: less },
          });
          child.on("error", () => resolve());
          child.on("exit", () => resolve());
          child.stdin.on("error", () => undefined);
          child.stdin.end(text);
        }),
    );
    this.o.redraw();
  }

  /** Hand the terminal to a program (keys, cursor, screen) and take it back when it ends. */
  private async suspend<T>(fn: () => Promise<T>): Promise<T> {
    this.suspended = true;
    this.detach();
    this.o.ctx.io.out(`${ANSI.showCursor}\x1b[2J\x1b[H`);
    try {
      return await fn();
    } finally {
      this.o.ctx.io.out(`${ANSI.hideCursor}\x1b[2J\x1b[H`);
      this.o.cleared();
      this.suspended = false;
      this.attach();
    }
  }
}

/** Keys work only with a terminal on both ends (piped or redirected, watch stays the read-only table or lines). */
export function keysPossible(ctx: CliContext): boolean {
  return ctx.io.isTTY && process.stdin.isTTY === true && typeof process.stdin.setRawMode === "function";
}
