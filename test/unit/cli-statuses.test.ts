// The CLI's statuses have one list (cli/common/options.ts STATUSES, checked at compile time against the core's
// AgentStatus, which test/unit/contract-schema pins to the result schema): watch's "not closed" filter comes from it,
// and it matches what the result schema and task.list's status filter accept, so a status added in one place cannot
// be missed by watch (a task in a new status vanishing from the table without --all).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { NOT_CLOSED } from "../../src/cli/commands/watch.js";
import { STATUSES } from "../../src/cli/common/options.js";

const root = join(import.meta.dirname, "..", "..", "..");
/** Every enum in a schema file that names the "starting" status (the status lists it declares). */
function statusEnums(file: string): string[][] {
  const found: string[][] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object")
      for (const [k, x] of Object.entries(v)) {
        if (k === "enum" && Array.isArray(x) && x.includes("starting")) found.push(x as string[]);
        else walk(x);
      }
  };
  walk(JSON.parse(readFileSync(join(root, "schema", file), "utf8")));
  return found;
}

test("watch without --all asks for every status but closed, from the one list of statuses", () => {
  assert.deepEqual(
    [...NOT_CLOSED].sort(),
    STATUSES.filter((s) => s !== "closed").sort(),
    "watch's filter is the list less closed",
  );
});

test("the one list of statuses is the result schema's and task.list's status enum", () => {
  for (const file of ["agent-result.schema.json", join("protocol", "task.list.json")]) {
    const enums = statusEnums(file);
    assert.ok(enums.length > 0, `${file} names the statuses`);
    for (const e of enums) assert.deepEqual([...e].sort(), [...STATUSES].sort(), file);
  }
});
