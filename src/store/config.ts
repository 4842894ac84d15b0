// config.json in the home: validated against schema/config.schema.json, merged over the defaults, rewritten atomically.
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { Ajv2020, type ErrorObject, type ValidateFunction } from "ajv/dist/2020.js";
import { DshError } from "../core/errors.js";
import type { MachineSpec } from "../core/machines.js";
import type { NotifyConfig } from "../core/notify.js";
import type { CapLimits } from "../core/budget.js";
import { fsError, readIfExists, writeAtomic } from "./fsio.js";
import { expandHome } from "./home.js";

export type RuntimeChoice = "auto" | "herdr" | "tmux" | "headless";

export interface Config {
  enabled: boolean;
  /** Absent: a spawn without a model lets pi use its own default. */
  defaultModel?: string;
  modelAliases: Record<string, string>;
  defaultThinking: "off" | "minimal" | "low" | "medium" | "high" | "xhigh" | "max";
  maxParallelAgents: number;
  maxQueuedAgents: number;
  queueTimeoutMs: number;
  defaultTimeoutMs: number;
  readinessTimeoutMs: number;
  /** Absolute paths (`~` expanded); empty means anywhere. */
  allowCwd: string[];
  runtime: RuntimeChoice;
  tmuxSocket: string;
  herdrSocketPath?: string;
  herdrBin?: string;
  herdrSession?: string;
  patchCapBytes: number;
  /** Other machines by label (`dsh-herdr machine add`), reached over ssh (src/link/link.ts). */
  machines: Record<string, MachineSpec>;
  workspaceLabel: string;
  topology: "auto" | "split" | "workspace";
  closePaneOnDone: boolean;
  /** A settled task's idle child is ended after this long without a follow-up (0: never); respond relaunches it. */
  idleChildMs: number;
  deliveryTtlMs: number;
  /**
   * What an owner pi session may do beyond delegating: `mayLand` gives it crew_land (task.land for its own tasks);
   * `mayRaiseCaps` lets its respond raise a spend cap (else only a person does, with the CLI).
   */
  owner?: { mayLand?: boolean; mayRaiseCaps?: boolean };
  /**
   * The browser board (src/board): `port` on 127.0.0.1 (0: any free one), `enabled: false` serves none, and
   * `mayActOnOwnerTasks` lets the page land/respond/close/abort an owner pi's tasks (else they are read-only there).
   */
  board?: { enabled?: boolean; port?: number; socket?: string | boolean; mayActOnOwnerTasks?: boolean };
  /** land: each git process (and hook) a landing starts ends, with its process group, after `timeoutMs`. */
  land?: { timeoutMs?: number };
  /** Settings per repository root (absolute, `~` expanded): a .dsh-herdr.json's keys, overriding that file's. */
  repos?: Record<string, RepoSettings>;
  /** Webhooks and commands told of every settled cycle (src/notify); absent: none. */
  notify?: NotifyConfig;
  /** Spend limits: USD per owner per local day, and each task's default caps (absent: none). */
  /**
   * perDay: USD per owner per local day; reservePerTask: USD a task without a cost cap reserves of perDay while it is
   * queued or running (default 1); the caps: each task's when its spawn gives none.
   */
  budget?: CapLimits & { perDay?: number; reservePerTask?: number };
}

/** A repository's settings: .dsh-herdr.json at its root, or config.json repos.<path> (schema: $defs.repoSettings). */
export interface RepoSettings {
  worktree?: { include?: string[]; setup?: string; setupTimeoutMs?: number };
  checks?: string[];
  checkTimeoutMs?: number;
}

export const DEFAULT_CONFIG: Readonly<Config> = Object.freeze({
  enabled: true,
  modelAliases: {},
  defaultThinking: "medium",
  maxParallelAgents: 3,
  maxQueuedAgents: 10,
  queueTimeoutMs: 300_000,
  defaultTimeoutMs: 900_000,
  readinessTimeoutMs: 30_000,
  allowCwd: [],
  runtime: "auto",
  tmuxSocket: "dsh-herdr",
  patchCapBytes: 8 * 1024 * 1024,
  machines: {},
  workspaceLabel: "DSH · {repo}",
  topology: "auto",
  closePaneOnDone: false,
  idleChildMs: 600_000,
  deliveryTtlMs: 24 * 60 * 60 * 1000,
});

interface JsonSchemaNode {
  type?: string;
  enum?: unknown[];
  properties?: Record<string, JsonSchemaNode>;
  $id?: string;
}

function findSchemaFile(): string {
  // dist/src/store → ../../.. ; src/store → ../.. : walk up to the package root that holds schema/.
  let dir = import.meta.dirname;
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, "schema", "config.schema.json");
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new DshError("INTERNAL", "schema/config.schema.json not found next to the package; reinstall dsh-herdr.");
}

let compiled: { schema: JsonSchemaNode; validate: ValidateFunction } | undefined;
function validator(): NonNullable<typeof compiled> {
  if (compiled === undefined) {
    const schema = JSON.parse(readFileSync(findSchemaFile(), "utf8")) as JsonSchemaNode;
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    compiled = { schema, validate: ajv.compile(schema) };
  }
  return compiled;
}

export function configPath(home: string): string {
  return join(home, "config.json");
}

function describe(err: ErrorObject, file: string): string {
  const key = err.instancePath.replace(/^\//, "").replace(/\//g, ".");
  if (err.keyword === "additionalProperties") {
    const extra = String((err.params as { additionalProperty?: string }).additionalProperty);
    const where = key === "" ? extra : `${key}.${extra}`;
    return `unknown key "${where}" in ${file}; remove it (see schema/config.schema.json for the keys).`;
  }
  const allowed =
    err.keyword === "enum"
      ? ` (one of ${JSON.stringify((err.params as { allowedValues?: unknown[] }).allowedValues)})`
      : "";
  return `"${key || "(root)"}" ${err.message ?? "is invalid"}${allowed} in ${file}; fix it with \`dsh-herdr config set ${key || "<key>"} <value>\` or edit the file.`;
}

/** Validate a parsed config object; throws CONFIG_INVALID naming the first bad key and the fix. */
export function validateConfig(value: unknown, file = "config.json"): asserts value is Partial<Config> {
  const { validate } = validator();
  if (!validate(value)) {
    const errs = validate.errors ?? [];
    const msgs = errs.map((e) => describe(e, file));
    throw new DshError("CONFIG_INVALID", msgs[0] ?? `${file} is invalid`, { errors: msgs });
  }
}

/** config.json is a few KiB; a larger one is not a config. */
export const CONFIG_MAX_BYTES = 1024 * 1024;

/** config.json checked before it is read: a regular file (a symlink to one is fine), at most CONFIG_MAX_BYTES. */
function readConfigText(file: string): Promise<string | undefined> {
  return readIfExists(file, {
    maxBytes: CONFIG_MAX_BYTES,
    refuse: (why) =>
      new DshError(
        "CONFIG_INVALID",
        `${file} ${why}; replace it with a JSON file (\`dsh-herdr config set\` writes one) or delete it to use the defaults.`,
      ),
  });
}

async function readRaw(home: string): Promise<Record<string, unknown>> {
  const file = configPath(home);
  const text = await readConfigText(file);
  if (text === undefined || text.trim() === "") return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new DshError(
      "CONFIG_INVALID",
      `${file} is not valid JSON (${(e as Error).message}); fix the syntax or delete the file to use the defaults.`,
    );
  }
  validateConfig(parsed, file);
  return parsed as Record<string, unknown>;
}

/** The effective config: defaults, overlaid by config.json (missing file = defaults), with `~` expanded. */
export async function loadConfig(home: string, env: NodeJS.ProcessEnv = process.env): Promise<Config> {
  const raw = await readRaw(home);
  const cfg = { ...structuredClone(DEFAULT_CONFIG), ...raw } as Config & { $schema?: string };
  delete cfg.$schema;
  cfg.allowCwd = cfg.allowCwd.map((p) => expandHome(p, env));
  if (cfg.herdrSocketPath !== undefined) cfg.herdrSocketPath = expandHome(cfg.herdrSocketPath, env);
  if (cfg.herdrBin !== undefined) cfg.herdrBin = expandHome(cfg.herdrBin, env);
  if (typeof cfg.board?.socket === "string") cfg.board = { ...cfg.board, socket: expandHome(cfg.board.socket, env) };
  if (cfg.repos !== undefined)
    cfg.repos = Object.fromEntries(
      Object.entries(cfg.repos).map(([k, v]) => [expandHome(k, env).replace(/(.)\/+$/, "$1"), v]),
    );
  return cfg;
}

/**
 * Set one key (`maxParallelAgents`, or `modelAliases.flash` for one alias) and rewrite config.json atomically.
 * A string value for a non-string key is parsed as JSON (what a CLI passes). Validates before writing: a bad value
 * leaves the file as it was. `value === undefined` removes the key.
 */
export async function setConfigValue(home: string, key: string, value: unknown): Promise<Config> {
  const { schema } = validator();
  const [top, sub, ...rest] = key.split(".");
  const props = schema.properties ?? {};
  // One level down: modelAliases.<alias>, and the named keys of an object such as owner.mayLand.
  const subProps = top !== undefined ? props[top]?.properties : undefined;
  if (
    top === undefined ||
    !(top in props) ||
    top === "$schema" ||
    rest.length > 0 ||
    (sub !== undefined && top !== "modelAliases" && !(subProps && sub in subProps))
  ) {
    const known = Object.keys(props)
      .filter((k) => k !== "$schema")
      .join(", ");
    throw new DshError(
      "CONFIG_INVALID",
      `unknown config key "${key}"; known keys: ${known} (and modelAliases.<alias>, owner.mayLand, owner.mayRaiseCaps, board.port, board.socket, board.enabled, board.mayActOnOwnerTasks, budget.perDay, budget.reservePerTask, budget.maxCost, budget.maxOutputTokens, budget.maxTurns; edit config.json for repos).`,
    );
  }
  const node = sub === undefined ? props[top] : top === "modelAliases" ? { type: "string" } : subProps![sub];
  let v = value;
  if (typeof v === "string" && node?.type !== undefined && node.type !== "string") {
    try {
      v = JSON.parse(v);
    } catch {
      // A key that takes a string among other types (board.socket: a path or a boolean) keeps a non-JSON word.
      if (Array.isArray(node.type) && node.type.includes("string")) v = value;
      else
        throw new DshError(
          "CONFIG_INVALID",
          `"${key}" needs a ${node.type}; got ${JSON.stringify(value)}. Example: dsh-herdr config set ${key} ${exampleFor(node.type)}`,
        );
    }
  }
  const raw = await readRaw(home);
  const next: Record<string, unknown> = { ...raw };
  if (sub === undefined) {
    if (v === undefined) delete next[top];
    else next[top] = v;
  } else {
    const obj = { ...((raw[top] as Record<string, unknown> | undefined) ?? {}) };
    if (v === undefined) delete obj[sub];
    else obj[sub] = v;
    next[top] = obj;
  }
  validateConfig(next, configPath(home));
  try {
    await writeAtomic(configPath(home), JSON.stringify(next, null, 2) + "\n");
  } catch (e) {
    throw fsError(e, `write ${configPath(home)}`);
  }
  return loadConfig(home);
}

function exampleFor(type: string): string {
  return type === "integer" || type === "number"
    ? "3"
    : type === "boolean"
      ? "true"
      : type === "array"
        ? "'[\"~/code\"]'"
        : "'{}'";
}

/** The repository settings schema (config.schema.json $defs.repoSettings), for a .dsh-herdr.json file. */
let repoValidator: ValidateFunction | undefined;

/** Validate a repository's settings (a parsed .dsh-herdr.json); CONFIG_INVALID naming the first bad key. */
export function validateRepoSettings(value: unknown, file: string): asserts value is RepoSettings {
  if (repoValidator === undefined) {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    const { schema } = validator();
    ajv.addSchema(schema as object);
    repoValidator = ajv.getSchema(`${schema.$id}#/$defs/repoSettings`);
    if (repoValidator === undefined)
      throw new DshError("INTERNAL", "schema/config.schema.json has no $defs.repoSettings; reinstall dsh-herdr.");
  }
  if (!repoValidator(value)) {
    const msgs = (repoValidator.errors ?? []).map((e) =>
      describe(e, file).replace(/; fix it with .*$/, "; edit the file."),
    );
    throw new DshError("CONFIG_INVALID", msgs[0] ?? `${file} is invalid`, { errors: msgs });
  }
}

/** sha256 of config.json as it is on disk ("" text when absent): which version of the file a daemon runs on. */
export async function configFileDigest(home: string): Promise<string> {
  const text = (await readConfigText(configPath(home))) ?? "";
  return createHash("sha256").update(text).digest("hex");
}
