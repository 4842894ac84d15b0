// doctor: check everything dsh-herdr depends on; exit 1 on any FAIL.
import type { Command } from "commander";
import { loadConfig } from "../../store/config.js";
import type { CliContext } from "../common/context.js";
import { runDoctor, type CheckResult } from "../doctor/checks.js";
import { EXIT } from "../common/exit-codes.js";
import { packageRoot } from "../common/home.js";
import { printJson } from "../common/io.js";
import { examples, jsonOption } from "../common/options.js";

export function renderChecks(checks: readonly CheckResult[]): string {
  const tag = { ok: "OK  ", warn: "WARN", fail: "FAIL" } as const;
  const lines = checks.map(
    (c) => `${tag[c.level]}  ${c.name.padEnd(6)}  ${c.detail}${c.level !== "ok" && c.fix ? ` — fix: ${c.fix}` : ""}`,
  );
  const fails = checks.filter((c) => c.level === "fail").length;
  const warns = checks.filter((c) => c.level === "warn").length;
  lines.push(fails > 0 ? `${fails} check(s) failed` : `all checks passed${warns > 0 ? ` (${warns} warning(s))` : ""}`);
  return lines.join("\n") + "\n";
}

export function registerDoctorCommand(program: Command, ctx: CliContext): void {
  const doctor = program
    .command("doctor")
    .description("check node, git, pi, tmux, Herdr, the home, config and disk; every FAIL names the fix");
  jsonOption(doctor);
  examples(doctor, ["dsh-herdr doctor", "dsh-herdr doctor --json | jq '.checks[] | select(.level==\"fail\")'"]);
  doctor.action(async (o: { json?: boolean }) => {
    const checks = await runDoctor({
      env: ctx.io.env,
      home: ctx.home,
      packageRoot,
      validateConfig: async (home) => void (await loadConfig(home, ctx.io.env)),
      loadConfig: (home) => loadConfig(home, ctx.io.env),
    });
    const ok = checks.every((c) => c.level !== "fail");
    if (o.json) printJson(ctx.io, { ok, checks });
    else ctx.io.out(renderChecks(checks));
    ctx.exitCode = ok ? EXIT.ok : EXIT.failed;
  });
}
