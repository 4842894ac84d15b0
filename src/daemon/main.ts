// Entry: `node dist/src/daemon/main.js run|start|stop|status --home <dir>`. `run` serves in the foreground
// (systemd, debugging); the others talk to a daemon from outside. Also exports the helpers for the CLI.
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { isDshError } from "../core/errors.js";
import { resolveHome } from "../store/home.js";
import { runDaemon } from "./daemon.js";
import { applyEnvFile } from "./daemon-env.js";
import { daemonStatus, startDaemon, stopDaemon } from "../client/daemon-control.js";

export { runDaemon, type RunDaemonOptions, type RunningDaemon } from "./daemon.js";
export { startDaemon, stopDaemon, daemonStatus, ensureDaemon } from "../client/daemon-control.js";

export async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { home: { type: "string" } },
    allowPositionals: true,
  });
  const home = values.home ?? resolveHome();
  const cmd = positionals[0] ?? "run";
  try {
    if (cmd === "run") {
      // <home>/env first (`daemon env set`; the unit's EnvironmentFile=): the daemon and its children get it.
      const envFile = applyEnvFile(home);
      // Listened for before the daemon starts: its socket answers before its start is done (the board starts
      // after it), and a stop asked for then must stop it gracefully, not kill the process by the default action.
      let stopAsked = false;
      let running: Awaited<ReturnType<typeof runDaemon>> | undefined;
      const onSignal = () => {
        stopAsked = true;
        void running?.stop();
      };
      process.once("SIGTERM", onSignal);
      process.once("SIGINT", onSignal);
      const d = await runDaemon(home, { envFile });
      running = d;
      if (stopAsked) void d.stop();
      await d.done;
      return 0;
    }
    const out =
      cmd === "start"
        ? await startDaemon(home)
        : cmd === "stop"
          ? await stopDaemon(home)
          : cmd === "status"
            ? await daemonStatus(home)
            : undefined;
    if (out === undefined) {
      process.stderr.write(`unknown command ${cmd}; use run, start, stop or status\n`);
      return 2;
    }
    process.stdout.write(JSON.stringify(out) + "\n");
    return 0;
  } catch (e) {
    process.stderr.write(`dsh-herdr daemon: ${isDshError(e) ? `${e.code}: ${e.message}` : String(e)}\n`);
    return isDshError(e) && e.code === "DAEMON_RUNNING" ? 3 : 1;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  // Runtimes and watchers may hold handles a little longer; the command's work is done.
  process.exit(await main(process.argv.slice(2)));
}
