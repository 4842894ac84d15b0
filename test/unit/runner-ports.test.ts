// Events in, effects out, checked from the source of the whole product: a task's modules (evidence, commands, steer,
// pipeline, settle, recovery, the socket methods, the relay) are handed narrow ports, never the whole runner nor all
// of its ports, and none of them feeds the task's machine: they return the events they found and the runner
// (task-runner.ts) alone dispatches them. The events themselves are tested on plain objects in events-out.test.ts,
// task-launch-events, task-harvest-events and daemon-recover-steps.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";
import { repoRoot } from "../helpers/pi.js";

const src = join(repoRoot, "src");
/** The runner itself and its type: the one place that holds the whole task and feeds its machine. */
const RUNNER_ITSELF = new Set(["daemon/task/task-runner.ts", "daemon/task/runner-types.ts"]);
/** A relayed task's events are fed through the relay's one door to its runner (the remote half of dispatch). */
const RELAY_DOOR = "daemon/relay/relay-machine.ts";

function sources(): { name: string; sf: ts.SourceFile }[] {
  const walk = (d: string): string[] =>
    readdirSync(d).flatMap((n) => {
      const p = join(d, n);
      return statSync(p).isDirectory() ? walk(p) : p.endsWith(".ts") ? [p] : [];
    });
  return walk(src)
    .map((p) => ({ name: relative(src, p), p }))
    .filter(({ name }) => !RUNNER_ITSELF.has(name))
    .map(({ name, p }) => ({
      name,
      sf: ts.createSourceFile(name, readFileSync(p, "utf8"), ts.ScriptTarget.Latest, true),
    }));
}

const at = (name: string, sf: ts.SourceFile, node: ts.Node): string =>
  `${name}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}`;

/** Every function with a parameter typed exactly `Runner`, every `Pick<Runner, ...>` that hands over "ports", and every
 * use of the runner's `dispatch` / `dispatchRemote` (a call, a reference or a port's key). */
function scan(): {
  whole: string[];
  allPorts: string[];
  dispatch: string[];
  dispatchRemote: string[];
  chain: string[];
} {
  const out = {
    chain: [] as string[],
    whole: [] as string[],
    allPorts: [] as string[],
    dispatch: [] as string[],
    dispatchRemote: [] as string[],
  };
  for (const { name, sf } of sources()) {
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && "parameters" in node)
        for (const p of node.parameters)
          if (
            p.type &&
            ts.isTypeReferenceNode(p.type) &&
            !p.type.typeArguments &&
            p.type.typeName.getText(sf) === "Runner"
          )
            out.whole.push(at(name, sf, p));
      if (
        ts.isTypeReferenceNode(node) &&
        node.typeName.getText(sf) === "Pick" &&
        node.typeArguments?.[0]?.getText(sf) === "Runner" &&
        /"ports"/.test(node.typeArguments[1]?.getText(sf) ?? "")
      )
        out.allPorts.push(at(name, sf, node));
      const key = ts.isPropertyAccessExpression(node)
        ? node.name.text
        : ts.isLiteralTypeNode(node) && ts.isStringLiteral(node.literal)
          ? node.literal.text
          : undefined;
      if (key === "dispatch") out.dispatch.push(at(name, sf, node));
      // `x.chain = ...` on anything but `this` (a helper's own queue): a task's chain is the runner's (onChain).
      if (
        ts.isBinaryExpression(node) &&
        node.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
        ts.isPropertyAccessExpression(node.left) &&
        node.left.name.text === "chain" &&
        node.left.expression.kind !== ts.SyntaxKind.ThisKeyword
      )
        out.chain.push(at(name, sf, node));
      if (key === "dispatchRemote") out.dispatchRemote.push(at(name, sf, node));
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out;
}

const found = scan();

test("no module but the runner takes the whole Runner: each is handed a narrow port (TaskPort<state, ports>)", () => {
  assert.deepEqual(found.whole, [], "these take the whole Runner: give them a TaskPort naming what they use");
});

test("no port hands over all of a task's ports: TaskPort<K, P> names the ones it uses", () => {
  assert.deepEqual(found.allPorts, [], "these hand over every port: use TaskPort<state keys, port keys>");
});

test("no module but the runner feeds a task's machine: they return their events (dispatch)", () => {
  assert.deepEqual(found.dispatch, [], "these call dispatch: return the event and let the runner feed it");
});

test("no module but the runner writes a task's chain: what waits on the task is queued through runner.onChain", () => {
  assert.deepEqual(found.chain, [], "these assign a task's chain: use r.onChain(op)");
});

test("a relayed task's events reach its runner through the relay's one door (dispatchRemote)", () => {
  assert.deepEqual(
    found.dispatchRemote.filter((f) => !f.startsWith(`${RELAY_DOOR}:`)),
    [],
    `feed a relayed task through stepRemote (${RELAY_DOOR})`,
  );
  assert.ok(found.dispatchRemote.length > 0, "the scan finds the relay's door (else it looks in the wrong place)");
});

test("the scan sees what it checks: the runner's own file dispatches, so a rename cannot empty these lists", () => {
  const runner = readFileSync(join(src, "daemon", "task", "task-runner.ts"), "utf8");
  assert.match(runner, /this\.dispatch\(/);
  assert.ok(sources().length > 100, "the scan reads the whole of src/");
});
