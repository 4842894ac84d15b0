import { test } from "node:test";
import assert from "node:assert/strict";
import { Ajv2020 } from "ajv/dist/2020.js";
import {
  CREW_TOOL_PARAMETERS,
  checkAbortArgs,
  checkDoneArgs,
  checkLandArgs,
  checkNoArgs,
  checkRespondArgs,
  checkSpawnArgs,
  formatCrewTask,
  toolErrorText,
} from "../../src/core/crew/crew-tools.js";

const task = { goal: "Add a flag", context: [], instructions: ["Edit cli.ts"] };
const err = (c: { ok: boolean; error?: string }) => (c.ok ? "" : c.error!);

test("crew_spawn: valid args come back trimmed; blank brief, unknown subagent, unknown fields and bad tasks are named", () => {
  const good = checkSpawnArgs({ subagent: " worker ", brief: " label ", task }, ["worker", "scout"]);
  assert.deepEqual(good, { ok: true, value: { subagent: "worker", brief: "label", task } });
  assert.equal(
    err(checkSpawnArgs({ subagent: "worker", brief: "  ", task }, ["worker"])),
    "brief is required and must not be empty.",
  );
  assert.equal(
    err(checkSpawnArgs({ subagent: "nope", brief: "b", task }, ["scout", "worker"])),
    'Unknown subagent: "nope". Available: scout, worker.',
  );
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task, extra: 1 }, ["worker"])),
    /unknown field\(s\) extra/,
  );
  assert.equal(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task: { ...task, goal: "" } }, ["worker"])),
    "task.goal is required and must not be empty.",
  );
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task: { ...task, instructions: [] } }, ["worker"])),
    /task.instructions must contain at least one/,
  );
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task: { ...task, context: [" "] } }, ["worker"])),
    /task.context must be an array of non-empty strings/,
  );
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task: "do it" }, ["worker"])),
    /task is required and must be a structured assignment/,
  );
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task: { ...task, steps: [] } }, ["worker"])),
    /task has unknown field\(s\) steps/,
  );
});

test("crew_spawn: machine is a label, cwd an absolute path that goes with a machine (the call's or the definition's)", () => {
  assert.deepEqual(
    checkSpawnArgs({ subagent: "worker", brief: "b", task, machine: " builder ", cwd: " /srv/repo " }, ["worker"]),
    { ok: true, value: { subagent: "worker", brief: "b", task, machine: "builder", cwd: "/srv/repo" } },
  );
  assert.deepEqual(checkSpawnArgs({ subagent: "far", brief: "b", task, cwd: "/srv/repo" }, ["far"], ["far"]), {
    ok: true,
    value: { subagent: "far", brief: "b", task, cwd: "/srv/repo" },
  });
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task, cwd: "/srv/repo" }, ["worker"])),
    /cwd is for a subagent on another machine; give machine too/,
  );
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task, machine: "two words" }, ["worker"])),
    /machine must be a machine label/,
  );
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task, machine: "builder", cwd: "repo" }, ["worker"])),
    /cwd must be an absolute directory on the machine/,
  );
  // Without cwd a subagent on another machine would work in this session's path there: refused by name.
  assert.match(
    err(checkSpawnArgs({ subagent: "worker", brief: "b", task, machine: "builder" }, ["worker"])),
    /machine "builder" needs cwd: the absolute directory on that machine/,
  );
  assert.match(err(checkSpawnArgs({ subagent: "far", brief: "b", task }, ["far"], ["far"])), /needs cwd/);
});

test("crew_respond / crew_done: ids and messages must be non-blank, unknown fields rejected", () => {
  assert.deepEqual(checkRespondArgs({ subagent_id: " t1 ", message: "yes" }), {
    ok: true,
    value: { subagent_id: "t1", message: "yes" },
  });
  assert.match(err(checkRespondArgs({ subagent_id: "t1", message: " " })), /message is required/);
  assert.match(err(checkRespondArgs({ subagent_id: "", message: "x" })), /needs subagent_id/);
  assert.match(err(checkRespondArgs({ subagent_id: "t1", message: "x", urgent: true })), /unknown field\(s\) urgent/);
  assert.deepEqual(checkDoneArgs({ subagent_id: "t1" }), { ok: true, value: { subagent_id: "t1" } });
  assert.match(err(checkDoneArgs({})), /crew_done needs subagent_id/);
});

test("crew_abort: exactly one mode; ids trimmed and de-duplicated", () => {
  assert.deepEqual(checkAbortArgs({ subagent_ids: ["a", " a", "b"] }), {
    ok: true,
    value: { mode: "ids", ids: ["a", "b"] },
  });
  assert.deepEqual(checkAbortArgs({ subagent_id: "a" }), { ok: true, value: { mode: "ids", ids: ["a"] } });
  assert.deepEqual(checkAbortArgs({ all: true }), { ok: true, value: { mode: "all" } });
  const one = "Provide exactly one of: subagent_id, subagent_ids, or all=true.";
  assert.equal(err(checkAbortArgs({})), one);
  assert.equal(err(checkAbortArgs({ subagent_id: "a", all: true })), one);
  assert.match(err(checkAbortArgs({ subagent_ids: [""] })), /non-empty subagent ids/);
});

test("crew_list / crew_status take no arguments", () => {
  assert.equal(checkNoArgs("crew_list", {}).ok, true);
  assert.equal(checkNoArgs("crew_status", undefined).ok, true);
  assert.match(
    err(checkNoArgs("crew_status", { verbose: true })),
    /crew_status has unknown field\(s\) verbose; it takes no fields/,
  );
});

test("tool parameter schemas require the fields but leave unknown fields to the checks (so they get {error})", () => {
  const ajv = new Ajv2020({ strict: false });
  const spawn = ajv.compile(CREW_TOOL_PARAMETERS.crew_spawn);
  assert.equal(spawn({ subagent: "w", brief: "b", task }), true);
  assert.equal(spawn({ subagent: "w", brief: "b" }), false, "task is required");
  assert.equal(spawn({ subagent: "w", brief: "b", task, x: 1 }), true, "pi lets it through; checkSpawnArgs names it");
  assert.equal(checkSpawnArgs({ subagent: "w", brief: "b", task, x: 1 }, ["w"]).ok, false);
  const abort = ajv.compile(CREW_TOOL_PARAMETERS.crew_abort);
  assert.equal(abort({ subagent_ids: ["a"] }), true);
  assert.equal(abort({ subagent_ids: "a" }), false);
});

test("formatCrewTask and the error envelope", () => {
  assert.equal(
    formatCrewTask({ goal: "G", context: [], instructions: ["a", "b"] }),
    "## Goal\n\nG\n\n## Context\n\nNone.\n\n## Instructions\n\n1. a\n2. b",
  );
  assert.deepEqual(JSON.parse(toolErrorText('bad "x"')), { error: 'bad "x"' });
});

test("crew_land: a subagent id and an optional check flag; anything else is named", () => {
  assert.deepEqual(checkLandArgs({ subagent_id: " a1b2 " }), {
    ok: true,
    value: { subagent_id: "a1b2", check: false },
  });
  assert.deepEqual(checkLandArgs({ subagent_id: "a1b2", check: true }), {
    ok: true,
    value: { subagent_id: "a1b2", check: true },
  });
  assert.match(err(checkLandArgs({})), /crew_land needs subagent_id/);
  assert.match(err(checkLandArgs({ subagent_id: "a1b2", check: "yes" })), /check must be true or false/);
  assert.match(err(checkLandArgs({ subagent_id: "a1b2", force: true })), /unknown field\(s\) force/);
  assert.match(err(checkLandArgs("a1b2")), /crew_land needs \{subagent_id\}/);
});
