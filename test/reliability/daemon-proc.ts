// A daemon in its own process for the reliability tests, so it can be SIGKILLed:
//   node dist/test/reliability/daemon-proc.js <home> '<childEnv JSON>' ['<config JSON>']
// DSH_TEST_LIMITS='<JSON>' lowers the socket server's connection limits (server.ts ConnectionLimits).
// Prints "ready <pid>" once the socket is served; SIGTERM stops it gracefully.
import { runDaemon } from "../../src/daemon/daemon.js";

const [home, envJson, configJson] = process.argv.slice(2);
try {
  const d = await runDaemon(home!, {
    childEnv: JSON.parse(envJson ?? "{}") as Record<string, string>,
    ...(process.env.DSH_TEST_LIMITS ? { limits: JSON.parse(process.env.DSH_TEST_LIMITS) as object } : {}),
    config: { runtime: "headless", readinessTimeoutMs: 60_000, ...(JSON.parse(configJson ?? "{}") as object) },
  });
  process.once("SIGTERM", () => void d.stop());
  process.stdout.write(`ready ${process.pid}\n`);
  await d.done;
  process.exit(0);
} catch (e) {
  process.stderr.write(`daemon-proc: ${(e as { code?: string }).code ?? ""} ${(e as Error).message}\n`);
  process.exit(1);
}
