// schema, config get|set|unset|path: things that need no running daemon.
import type { Command } from "commander";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { DshError, isDshError } from "../../core/errors.js";
import { daemonStatus } from "../../client/daemon-control.js";
import { configFileDigest, configPath, loadConfig, setConfigValue } from "../../store/config.js";
import { ensureHome } from "../../store/home.js";
import type { CliContext } from "../common/context.js";
import { packageRoot } from "../common/home.js";
import { printJson } from "../common/io.js";
import { examples, jsonOption, usage } from "../common/options.js";
import { registerDaemonCommands } from "./daemon/daemon.js";

/** Read one key (`maxParallelAgents`, `modelAliases.flash`) from the effective config. */
export function configValue(cfg: Record<string, unknown>, key: string): unknown {
  let v: unknown = cfg;
  for (const part of key.split(".")) {
    if (v === null || typeof v !== "object" || !(part in v)) {
      throw new DshError("CONFIG_INVALID", `unknown config key "${key}"; \`dsh-herdr config get\` lists every key`);
    }
    v = (v as Record<string, unknown>)[part];
  }
  return v;
}

function show(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

export function registerAdminCommands(program: Command, ctx: CliContext): void {
  const schema = program.command("schema").description("print the AgentResult JSON Schema (schemaVersion 1)");
  jsonOption(schema);
  examples(schema, ["dsh-herdr schema > agent-result.schema.json"]);
  schema.action(() => {
    const file = join(packageRoot, "schema", "agent-result.schema.json");
    if (!existsSync(file)) throw new DshError("INTERNAL", `${file} is missing; reinstall dsh-herdr`);
    ctx.io.out(readFileSync(file, "utf8"));
  });

  const config = program.command("config").description("read and change config.json in the home");
  const get = config
    .command("get")
    .description("print the effective config, or one key")
    .argument("[key]", "e.g. maxParallelAgents or modelAliases.flash");
  jsonOption(get);
  examples(get, ["dsh-herdr config get", "dsh-herdr config get runtime"]);
  get.action(async (key: string | undefined, o: { json?: boolean }) => {
    const cfg = (await loadConfig(ctx.home, ctx.io.env)) as unknown as Record<string, unknown>;
    if (key === undefined) {
      if (o.json) return printJson(ctx.io, cfg);
      for (const [k, v] of Object.entries(cfg)) ctx.io.out(`${k} = ${show(v)}\n`);
      return;
    }
    const v = configValue(cfg, key);
    if (o.json) printJson(ctx.io, v);
    else ctx.io.out(show(v) + "\n");
  });

  const set = config
    .command("set")
    .description("set one key (validated before writing; a running daemon reloads it and this says whether it did)")
    .argument("<key>", "config key")
    .argument("<value>", "a string, or JSON for numbers, booleans, arrays");
  jsonOption(set);
  examples(set, [
    "dsh-herdr config set maxParallelAgents 5",
    "dsh-herdr config set modelAliases.flash openai/gpt-5-mini",
    `dsh-herdr config set allowCwd '["~/code"]'`,
  ]);
  set.action(async (key: string, value: string, o: { json?: boolean }) => {
    await ensureHome(ctx.home);
    const cfg = (await setConfigValue(ctx.home, key, value).catch((e: unknown) => {
      // A value or key the config refuses is a usage error (exit 2), as docs/cli.md says.
      throw isDshError(e) && e.code === "CONFIG_INVALID"
        ? new DshError("CONFIG_INVALID", e.message, { usage: true })
        : e;
    })) as unknown as Record<string, unknown>;
    const v = configValue(cfg, key);
    const daemon = await daemonTook(ctx.home);
    if (o.json) printJson(ctx.io, { key, value: v, daemon });
    else {
      ctx.io.out(`${key} = ${show(v)}\n`);
      if (daemon === "took") ctx.io.err("the running daemon took it: it applies to the next spawn\n");
      if (daemon === "not_taken")
        ctx.io.err(
          `the running daemon did not take it (see ${join(ctx.home, "daemon.log")}); restart it: dsh-herdr daemon stop && dsh-herdr daemon start\n`,
        );
    }
  });

  const unset = config
    .command("unset")
    .description("remove one key (back to its default)")
    .argument("<key>", "config key");
  jsonOption(unset);
  unset.action(async (key: string, o: { json?: boolean }) => {
    if (!existsSync(configPath(ctx.home))) throw usage(`there is no ${configPath(ctx.home)} yet; nothing to unset`);
    const cfg = (await setConfigValue(ctx.home, key, undefined)) as unknown as Record<string, unknown>;
    const v = key.includes(".") ? undefined : cfg[key];
    if (o.json) printJson(ctx.io, { key, value: v ?? null });
    else ctx.io.out(`${key} = ${show(v ?? "(unset)")}\n`);
  });

  const path = config.command("path").description("print where config.json lives");
  jsonOption(path);
  path.action((o: { json?: boolean }) => {
    if (o.json) printJson(ctx.io, { path: configPath(ctx.home), exists: existsSync(configPath(ctx.home)) });
    else ctx.io.out(configPath(ctx.home) + "\n");
  });

  registerDaemonCommands(program, ctx);
}

/** Whether the running daemon now runs on config.json as written: its daemon.status digest catches up in a moment. */
export async function daemonTook(home: string): Promise<"took" | "not_taken" | "not_running"> {
  const want = await configFileDigest(home);
  const deadline = Date.now() + 5000;
  for (;;) {
    const s = await daemonStatus(home).catch(() => ({ running: false }) as Record<string, unknown>);
    if (!s.running) return "not_running";
    if (s.configDigest === want) return "took";
    if (Date.now() > deadline) return "not_taken";
    await new Promise((r) => setTimeout(r, 100));
  }
}
