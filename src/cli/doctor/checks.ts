// `doctor`: one check per dependency; every FAIL names the fix. The checks live by what they look at (tools.ts,
// pi.ts, herdr.ts, home.ts, daemon.ts); this runs them all.
import { checkChildren } from "./children.js";
import { checkDaemonEnv } from "./daemon.js";
import { checkHerdr } from "./herdr.js";
import { checkConfig, checkDisk, checkHome } from "./home.js";
import { checkModel, checkPi } from "./pi.js";
import { checkGit, checkNode, checkTmux } from "./tools.js";
import type { DoctorContext, CheckResult } from "./types.js";

export type { CheckLevel, CheckResult, DoctorContext } from "./types.js";

/** Run every check; slow probes run in parallel. */
export async function runDoctor(ctx: DoctorContext): Promise<CheckResult[]> {
  const cfg = ctx.loadConfig ? await ctx.loadConfig(ctx.home).catch(() => undefined) : undefined;
  const [git, pi, tmux, herdr, config, daemon] = await Promise.all([
    checkGit(ctx.env),
    checkPi(ctx.env),
    checkTmux(ctx.env),
    checkHerdr(ctx.env),
    checkConfig(ctx),
    checkDaemonEnv(ctx.home, ctx.env, cfg),
  ]);
  const model = await checkModel(ctx.env, pi.level === "ok" ? pi.bin : undefined, cfg);
  const { bin: _bin, ...piCheck } = pi;
  return [
    checkNode(),
    git,
    piCheck,
    model,
    tmux,
    herdr,
    ...checkHome(ctx.home),
    config,
    ...daemon,
    checkChildren(ctx.home),
    checkDisk(ctx.home),
  ];
}
