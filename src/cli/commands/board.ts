// board: the URL of the browser board the daemon serves (with its token), opened in a browser when one is at hand.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { hostname, userInfo } from "node:os";
import { boardLink, type BoardAddress } from "../../board/link.js";
import type { Command } from "commander";
import { DshError } from "../../core/errors.js";
import { boardAddressPath, ensureBoardToken, rotateBoardToken } from "../../board/token.js";
import type { CliContext } from "../common/context.js";
import { printJson } from "../common/io.js";
import { examples, jsonOption } from "../common/options.js";

export function registerBoardCommand(program: Command, ctx: CliContext): void {
  const cmd = program
    .command("board")
    .description("the live board in a browser: prints its URL (with its token) and opens it where a browser is at hand")
    .option("--rotate", "replace the board's token: every URL and signed-in page given out before stops working")
    .option("--no-open", "print the URL only");
  jsonOption(cmd);
  examples(cmd, ["dsh-herdr board", "dsh-herdr board --rotate", "dsh-herdr board --json | jq -r .url"]);
  cmd.action(async (o: { rotate?: boolean; open: boolean; json?: boolean }) => {
    const conn = await ctx.connect({ start: true });
    const status = await conn.request("daemon.status", {});
    const token = o.rotate ? await rotateBoardToken(ctx.home) : await ensureBoardToken(ctx.home);
    const link = boardLink(servedBoard(ctx.home, status.pid), token, hostname(), userInfo().username);
    const url = link.url;
    if (o.json) return printJson(ctx.io, link);
    if (link.ssh) {
      // On a Unix socket: nothing to open here; the laptop forwards a port of its own to the socket.
      ctx.io.out(`on your laptop, run:\n  ${link.ssh}\nthen open:\n  ${url}\n`);
      if (o.rotate) ctx.io.err("the board's token was replaced: pages opened before must use this URL\n");
      return;
    }
    ctx.io.out(`${url}\n`);
    if (o.rotate) ctx.io.err("the board's token was replaced: pages opened before must use this URL\n");
    // Only for a person at a terminal: scripts (and tests) get the URL and nothing opens.
    if (o.open && ctx.io.isTTY) openBrowser(url);
  });
}

/** The address the running daemon's board listens on (board.json, written by that daemon). */
function servedBoard(home: string, pid: number): BoardAddress {
  let a: { url?: unknown; pid?: unknown; socket?: unknown } | undefined;
  try {
    a = JSON.parse(readFileSync(boardAddressPath(home), "utf8")) as typeof a;
  } catch {
    a = undefined;
  }
  if (!a || a.pid !== pid || typeof a.url !== "string")
    throw new DshError(
      "BAD_STATE",
      "the daemon serves no board: it is off in config (`dsh-herdr config set board.enabled true`) or could not listen (see daemon.log); then `dsh-herdr daemon stop` and `dsh-herdr daemon start`",
    );
  return { url: a.url, ...(typeof a.socket === "string" ? { socket: a.socket } : {}) };
}

function openBrowser(url: string): void {
  const browser = process.env.BROWSER?.split(":")[0] || (process.platform === "darwin" ? "open" : "xdg-open");
  try {
    const child = spawn(browser, [url], { stdio: "ignore", detached: true });
    child.on("error", () => undefined); // no browser here: the printed URL is the way in
    child.unref();
  } catch {
    /* the printed URL is the way in */
  }
}
