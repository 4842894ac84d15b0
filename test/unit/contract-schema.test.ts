// Keeps the three descriptions of AgentResult in step: schema/agent-result.schema.json, the type in
// src/core/types.ts (parsed from its source text) and docs/result-contract.md.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { Ajv2020 } from "ajv/dist/2020.js";

const root = join(import.meta.dirname, "..", "..", "..");
const schema = JSON.parse(readFileSync(join(root, "schema", "agent-result.schema.json"), "utf8")) as Schema;
const typesSrc = readFileSync(join(root, "src", "core", "types.ts"), "utf8");
const doc = readFileSync(join(root, "docs", "result-contract.md"), "utf8");
const validate = new Ajv2020({ strict: true, allErrors: true }).compile(schema);

interface Schema {
  $ref?: string;
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  required?: string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean;
  $defs?: Record<string, Schema>;
}

function resolve(s: Schema): Schema {
  if (s.$ref === undefined) return s;
  const name = s.$ref.replace("#/$defs/", "");
  const target = schema.$defs?.[name];
  assert.ok(target, `unresolved ${s.$ref}`);
  return target;
}

/** interface name → field name → {optional, type text}; type alias name → string literal members. */
const interfaces = new Map<string, Map<string, { optional: boolean; type: string }>>();
for (const m of typesSrc.matchAll(/export interface (\w+) \{([\s\S]*?)\n\}/g)) {
  const fields = new Map<string, { optional: boolean; type: string }>();
  for (const f of m[2]!.matchAll(/^\s*(\w+)(\?)?:\s*([^;]+);/gm))
    fields.set(f[1]!, { optional: f[2] === "?", type: f[3]!.trim() });
  interfaces.set(m[1]!, fields);
}
const unions = new Map<string, string[]>();
for (const m of typesSrc.matchAll(/export type (\w+) =([^;]+);/g)) {
  const members = [...m[2]!.matchAll(/"([^"]+)"/g)].map((x) => x[1]!);
  if (members.length > 0) unions.set(m[1]!, members);
}

/** Every object in the schema, with its dotted path and the TS interface it maps to. */
function walk(
  s: Schema,
  path: string,
  iface: string,
  visit: (path: string, name: string, prop: Schema, iface: string) => void,
): void {
  const obj = resolve(s);
  for (const [name, prop] of Object.entries(obj.properties ?? {})) {
    visit(path === "" ? name : `${path}.${name}`, name, prop, iface);
    const inner = resolve(prop);
    if (inner.properties) {
      const field = interfaces.get(iface)?.get(name);
      assert.ok(field, `${iface}.${name} missing`);
      walk(inner, path === "" ? name : `${path}.${name}`, field.type, visit);
    }
  }
}

test("every schema property is in types.ts with the same optionality, and enums match the TS unions", () => {
  let seen = 0;
  walk(schema, "", "AgentResult", (path, name, prop, iface) => {
    seen++;
    const fields = interfaces.get(iface);
    assert.ok(fields, `types.ts has no interface ${iface} (for ${path})`);
    const field = fields.get(name);
    assert.ok(field, `types.ts ${iface} has no field ${name} (schema ${path})`);
    const parentRequired = resolveParent(path).required ?? [];
    assert.equal(
      field.optional,
      !parentRequired.includes(name),
      `${path}: optional in types.ts iff not required in the schema`,
    );
    const p = resolve(prop);
    if (p.enum) {
      const members = unions.get(field.type);
      assert.ok(members, `${path}: types.ts type ${field.type} is not a string union`);
      assert.deepEqual([...members].sort(), [...(p.enum as string[])].sort(), `${path} enum`);
    }
    assert.ok(p.properties === undefined || p.additionalProperties === false, `${path}: objects are closed`);
  });
  assert.ok(seen > 50, `walked ${seen} properties`);
  assert.equal(schema.additionalProperties, false);
});

function resolveParent(path: string): Schema {
  let s: Schema = schema;
  for (const part of path.split(".").slice(0, -1)) s = resolve(resolve(s).properties![part]!);
  return resolve(s);
}

test("every field of the TS interfaces is in the schema (nothing undocumented sneaks into the type)", () => {
  const check = (s: Schema, iface: string, path: string) => {
    const obj = resolve(s);
    for (const [name, f] of interfaces.get(iface)!) {
      const prop = obj.properties?.[name];
      assert.ok(prop, `types.ts ${iface}.${name} is not in the schema at ${path || "(root)"}`);
      if (interfaces.has(f.type)) check(prop, f.type, path === "" ? name : `${path}.${name}`);
    }
  };
  check(schema, "AgentResult", "");
});

test("every schema property is explained in docs/result-contract.md by its dotted path", () => {
  const missing: string[] = [];
  walk(schema, "", "AgentResult", (path) => {
    if (!doc.includes("`" + path + "`")) missing.push(path);
  });
  assert.deepEqual(missing, [], "add these to docs/result-contract.md");
  for (const s of resolve(schema.properties!.status!).enum as string[])
    assert.ok(doc.includes("`" + s + "`"), `status ${s} documented`);
});

// The spec's example object (shared/spec/agent-result-contract.md), copied verbatim.
const SPEC_EXAMPLE = {
  schemaVersion: 1,
  taskId: "tmg3k2a1b2c3",
  status: "completed",
  role: "worker",
  agent: {
    name: "worker-flash-a1b2",
    paneId: "wV:p9",
    tabId: "wV:t4",
    workspaceId: "wV",
    kind: "pi",
    model: "commandcode/deepseek/deepseek-v4.1-flash",
    thinking: "high",
    machine: "builder-01",
  },
  herdrStatus: "idle",
  sessionPath: "/Users/me/.pi/agent/sessions/.../x.jsonl",
  summary: "added retry with jitter",
  finalMessage: "…the exact last assistant message…",
  result: {
    path: "/Users/me/.dsh/herdr/tasks/tmg3k2a1b2c3/result.md",
    text: "…body…",
    meta: {
      status: "completed",
      summary: "added retry with jitter",
      tests: "npm test (42 passed)",
      files: "src/http.ts, src/http.test.ts",
    },
  },
  diff: {
    baselineHead: "…",
    stat: " 2 files changed, 40 insertions(+), 7 deletions(-)",
    files: ["src/http.ts", "src/http.test.ts"],
    untracked: [],
    patchPath: "/Users/me/.dsh/herdr/tasks/tmg3k2a1b2c3/diff.patch",
    patchBytes: 3210,
    truncated: false,
    dirtyAtStart: [],
  },
  tests: "npm test (42 passed)",
  files: ["src/http.ts", "src/http.test.ts"],
  worktree: {
    path: "/Users/me/.dsh/herdr/worktrees/api-tmg3k2a1b2c3",
    branch: "dsh/tmg3k2a1b2c3",
    repo: "/Users/me/code/api",
    base: "HEAD",
  },
  usage: { assistant: 3, toolCalls: 12, outputTokens: 4800 },
  timing: { createdAt: 1760000000000, promptedAt: 1760000000500, settledAt: 1760000042000, elapsedMs: 42000 },
  nextAction: "none",
};

test("the spec's example object validates", () => {
  assert.ok(validate(SPEC_EXAMPLE), JSON.stringify(validate.errors));
  const minimal = {
    schemaVersion: 1,
    taskId: "tmg3k2a1b2c3",
    status: "running",
    role: "reviewer",
    agent: { name: "a", kind: "pi", model: "m", thinking: "off" },
    herdrStatus: "unknown",
    summary: "",
    timing: { createdAt: 0 },
    nextAction: "wait",
  };
  assert.ok(validate(minimal), JSON.stringify(validate.errors));
});

test("invalid objects are refused: bad enum, missing field, extra or misspelt field, wrong version, bad task id", () => {
  const clone = () => structuredClone(SPEC_EXAMPLE) as Record<string, unknown>;
  const cases: [string, (o: Record<string, unknown>) => void, RegExp][] = [
    [
      "bad status",
      (o) => {
        o.status = "done";
      },
      /must be equal to one of the allowed values/,
    ],
    [
      "bad nextAction",
      (o) => {
        o.nextAction = "retry";
      },
      /allowed values/,
    ],
    [
      "missing summary",
      (o) => {
        delete o.summary;
      },
      /must have required property 'summary'/,
    ],
    [
      "missing agent.thinking",
      (o) => {
        delete (o.agent as Record<string, unknown>).thinking;
      },
      /required property 'thinking'/,
    ],
    [
      "missing timing.createdAt",
      (o) => {
        o.timing = {};
      },
      /required property 'createdAt'/,
    ],
    [
      "extra top-level field",
      (o) => {
        o.sumary = "typo";
      },
      /must NOT have additional properties/,
    ],
    [
      "extra nested field",
      (o) => {
        (o.usage as Record<string, unknown>).promptTokens = 1;
      },
      /additional properties/,
    ],
    [
      "extra meta key",
      (o) => {
        ((o.result as Record<string, unknown>).meta as Record<string, unknown>).owner = "x";
      },
      /additional properties/,
    ],
    [
      "schemaVersion 2",
      (o) => {
        o.schemaVersion = 2;
      },
      /must be equal to constant/,
    ],
    [
      "task id path",
      (o) => {
        o.taskId = "../etc";
      },
      /must match pattern/,
    ],
    [
      "negative usage",
      (o) => {
        (o.usage as Record<string, unknown>).toolCalls = -1;
      },
      /must be >= 0/,
    ],
  ];
  for (const [name, mutate, why] of cases) {
    const o = clone();
    mutate(o);
    assert.equal(validate(o), false, name);
    assert.match(JSON.stringify(validate.errors), why, name);
  }
});

test("every schema the package ships is valid JSON Schema 2020-12 (the daemon compiles them without the meta-schema check)", () => {
  const ajv = new Ajv2020({ strict: false });
  const files = [
    ...readdirSync(join(root, "schema"))
      .filter((f) => f.endsWith(".json"))
      .map((f) => join(root, "schema", f)),
    ...readdirSync(join(root, "schema", "protocol"))
      .filter((f) => f.endsWith(".json"))
      .map((f) => join(root, "schema", "protocol", f)),
  ];
  assert.ok(files.length >= 18, `${files.length} schema files`);
  for (const f of files) {
    const ok = ajv.validateSchema(JSON.parse(readFileSync(f, "utf8")) as object);
    assert.equal(ok, true, `${f}: ${JSON.stringify(ajv.errors)}`);
  }
  // And a broken one is caught, so the check above can fail.
  assert.equal(ajv.validateSchema({ type: "objekt" }), false);
});
