// daemon start|stop|status|run (log, install-unit: daemon-extras.ts; env, restart: daemon-env.ts), and gc.
import type { Command } from "commander";
import type { CliContext } from "../../common/context.js";
import { formatDuration } from "../../common/duration.js";
import { EXIT } from "../../common/exit-codes.js";
import { printJson } from "../../common/io.js";
import { runDaemonForeground, startDaemonFor, stopDaemonFor } from "../../common/daemon-control.js";
import { examples, jsonOption } from "../../common/options.js";
import { registerDaemonConnect } from "./daemon-connect.js";
import { registerDaemonExtras } from "./daemon-extras.js";
import { registerDaemonEnv } from "./daemon-env.js";

export function registerDaemonCommands(program: Command, ctx: CliContext): void {
  const daemon = program.command("daemon").description("start, stop and inspect the supervisor daemon of this home");

  const start = daemon.command("start").description("start the daemon in the background (no-op when it runs)");
  jsonOption(start);
  examples(start, ["dsh-herdr daemon start", "DSH_HERDR_HOME=/tmp/h dsh-herdr daemon start"]);
  start.action(async (o: { json?: boolean }) => {
    const r = await startDaemonFor(ctx.home, { env: ctx.io.env });
    if (o.json) printJson(ctx.io, r);
    else
      ctx.io.out(
        r.alreadyRunning
          ? `daemon already running (pid ${r.pid}) at ${ctx.home}\n`
          : `daemon started (pid ${r.pid}) at ${ctx.home}\n`,
      );
  });

  const stop = daemon
    .command("stop")
    .description("stop the daemon; open tasks keep running in their panes and are picked up on the next start");
  jsonOption(stop);
  stop.action(async (o: { json?: boolean }) => {
    const r = await stopDaemonFor(ctx.home);
    if (o.json) printJson(ctx.io, r);
    else ctx.io.out(r.wasRunning ? "daemon stopped\n" : `no daemon running at ${ctx.home}\n`);
  });

  const status = daemon
    .command("status")
    .description("pid, version, uptime and slot use of the running daemon (exit 1 when none runs)");
  jsonOption(status);
  status.action(async (o: { json?: boolean }) => {
    const conn = await ctx.connect();
    const s = await conn.request("daemon.status", {});
    if (o.json) return printJson(ctx.io, s);
    ctx.io.out(
      [
        `daemon ${s.version} (protocol ${s.protocol}) pid ${s.pid}, up ${formatDuration(s.uptimeMs)}`,
        `home: ${s.home}`,
        `socket: ${s.socketPath}`,
        `slots: ${s.running}/${s.maxParallelAgents} running, ${s.queued}/${s.maxQueuedAgents} queued, ${s.openTasks} open task(s)`,
        ...(s.runtime ? [`runtime: ${s.runtime}`] : []),
        ...(s.enabled === false ? ["enabled: false (spawns are refused; dsh-herdr config set enabled true)"] : []),
      ].join("\n") + "\n",
    );
  });

  registerDaemonExtras(daemon, ctx);
  registerDaemonEnv(daemon, ctx);

  const run = daemon
    .command("run")
    .description("run the daemon in the foreground (logs to daemon.log; Ctrl+C stops it)");
  run.action(async () => {
    ctx.exitCode = (await runDaemonForeground(ctx.home, ctx.signal, ctx.io.env)) === 0 ? EXIT.ok : EXIT.failed;
  });

  registerDaemonConnect(daemon, ctx);
}
