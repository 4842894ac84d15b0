// The protocol table is one declaration: the committed types are what the schemas generate, every method has its
// schema and its handler, and docs/socket-protocol.md lists the same methods.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { PUSH_METHODS, REQUEST_METHODS } from "../../src/protocol/methods.js";
import { repoRoot } from "../helpers/pi.js";

const generated = join(repoRoot, "src", "protocol", "methods.generated.ts");

test("src/protocol/methods.generated.ts is what schema/protocol/*.json generate (run `npm run gen:protocol`)", async () => {
  const gen = (await import(pathToFileURL(join(repoRoot, "scripts", "gen-protocol-types.mjs")).href)) as {
    generate(): Promise<string>;
  };
  const fresh = await gen.generate();
  const committed = readFileSync(generated, "utf8");
  if (fresh !== committed) {
    const a = committed.split("\n");
    const b = fresh.split("\n");
    const at = a.findIndex((line, i) => line !== b[i]);
    assert.fail(
      `methods.generated.ts drifted from the schemas at line ${at + 1}: committed ${JSON.stringify(a[at])}, generated ${JSON.stringify(b[at])}; run \`npm run gen:protocol\``,
    );
  }
});

test("every request method has a schema with params and result, and a Params/Result pair in the table", () => {
  const dir = join(repoRoot, "schema", "protocol");
  const titles = new Map<string, { $defs?: Record<string, unknown> }>();
  for (const f of readdirSync(dir).filter((x) => x.endsWith(".json"))) {
    const s = JSON.parse(readFileSync(join(dir, f), "utf8")) as { title: string; $defs?: Record<string, unknown> };
    titles.set(s.title, s);
  }
  const table = readFileSync(generated, "utf8");
  for (const m of REQUEST_METHODS) {
    const s = titles.get(m);
    assert.ok(s, `schema/protocol has no schema titled ${m}`);
    assert.ok(s.$defs?.["params"] && s.$defs["result"], `${m}: $defs.params and $defs.result`);
    assert.match(table, new RegExp(`^  "${m.replace(/\./g, "\\.")}": \\{ params: \\w+; result: \\w+ \\};$`, "m"));
  }
  // And nothing in the table that the method list does not name.
  const inTable = [...table.matchAll(/^ {2}"([a-z]+\.[a-z]+|hello)": \{ params/gm)].map((x) => x[1]);
  assert.deepEqual([...inTable].sort(), [...REQUEST_METHODS].sort());
});

test("docs/socket-protocol.md lists exactly the protocol table's request methods and pushes", () => {
  const doc = readFileSync(join(repoRoot, "docs", "socket-protocol.md"), "utf8");
  // A method is documented by its own heading (## task.get) or, for the child and owner groups, a bullet (- `child.event`).
  const headed = [...doc.matchAll(/^#{2,3} ([a-z]+(?:\.[a-z]+)?)\s*$/gm)].map((x) => x[1]!);
  const bulleted = [...doc.matchAll(/^- `((?:child|owner)\.[a-z]+)`/gm)].map((x) => x[1]!);
  const documented = new Set([...headed, ...bulleted].filter((m) => m === "hello" || m.includes(".")));
  assert.deepEqual([...documented].sort(), [...REQUEST_METHODS].sort(), "request methods in the docs");
  // A push is named in backquotes (`child.steer {cycle, n, text}`) or shown as a frame ({"method":"task.followed",…}).
  const undocumented = PUSH_METHODS.filter(
    (p) => !doc.includes(`\`${p}\``) && !doc.includes(`\`${p} `) && !doc.includes(`"method":"${p}"`),
  );
  assert.deepEqual(undocumented, [], "pushes the docs do not name");
});
