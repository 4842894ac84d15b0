// A task's modules act on the task through narrow ports (a `Pick<Runner, ...>` or a small interface), not the whole
// runner: checked from the source, so a narrowed function cannot quietly take the whole `Runner` again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { repoRoot } from "../helpers/pi.js";

const dir = join(repoRoot, "src", "daemon", "task");
/** The class itself and the type module: they are the runner, not modules handed it. */
const RUNNER_ITSELF = new Set(["task-runner.ts", "runner-types.ts", "supervisor-types.ts"]);

/**
 * The functions that still take the whole `Runner`, as `file:function`. This list may only shrink: narrow a function
 * and take it out; a function not listed here must not take the whole runner.
 */
const STILL_WHOLE = new Set<string>([]);

/** `file:function` for every function in the task modules with a parameter typed exactly `Runner`. */
function takingWholeRunner(): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).filter((n) => n.endsWith(".ts") && !RUNNER_ITSELF.has(n))) {
    const sf = ts.createSourceFile(name, readFileSync(join(dir, name), "utf8"), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isFunctionLike(node) && "parameters" in node) {
        const whole = node.parameters.some(
          (p) =>
            p.type !== undefined &&
            ts.isTypeReferenceNode(p.type) &&
            p.type.typeArguments === undefined &&
            p.type.typeName.getText(sf) === "Runner",
        );
        if (whole) out.push(`${name}:${functionName(node, sf)}`);
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out.sort();
}

function functionName(node: ts.Node, sf: ts.SourceFile): string {
  const named = node as { name?: ts.Node };
  if (named.name) return named.name.getText(sf);
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText(sf);
  return `<anonymous at line ${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}>`;
}

test("task modules: no function takes the whole Runner unless it is still on the (shrinking) list", () => {
  const found = takingWholeRunner();
  const regressed = found.filter((f) => !STILL_WHOLE.has(f));
  assert.deepEqual(regressed, [], "these take the whole Runner: give them a narrow port (Pick<Runner, ...>)");
});

test("task modules: the list of functions still taking the whole Runner names none that was narrowed", () => {
  const found = new Set(takingWholeRunner());
  const stale = [...STILL_WHOLE].filter((f) => !found.has(f));
  assert.deepEqual(stale, [], "these no longer take the whole Runner: take them off the list");
});

/**
 * The spawn pipeline, the harvest and the settle feed the machine nothing themselves: they return the events their
 * work ended in (admitted, launch_returned, launch_failed, harvested) and the runner alone dispatches them.
 */
const RETURNING_EVENTS = [
  "pipeline.ts",
  "settle.ts",
  "harvest.ts",
  "settle-checks.ts",
  "persist.ts",
  "workdir-setup.ts",
  "budget.ts",
];

test("pipeline and settle modules: no call of the machine's dispatch (they return events, the runner feeds them)", () => {
  const calls: string[] = [];
  for (const name of RETURNING_EVENTS) {
    const sf = ts.createSourceFile(name, readFileSync(join(dir, name), "utf8"), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (ts.isPropertyAccessExpression(node) && (node.name.text === "dispatch" || node.name.text === "dispatchRemote"))
        calls.push(`${name}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}`);
      if (ts.isLiteralTypeNode(node) && ts.isStringLiteral(node.literal) && node.literal.text === "dispatch")
        calls.push(`${name}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1} (in a port)`);
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  assert.deepEqual(calls, [], "these feed the machine themselves: return the event and let the runner dispatch it");
});

/** `file:line` of every `Pick<Runner, ...>` in the task modules that hands over `"ports"`: all of the task's ports. */
function pickingAllPorts(): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).filter((n) => n.endsWith(".ts") && !RUNNER_ITSELF.has(n))) {
    const sf = ts.createSourceFile(name, readFileSync(join(dir, name), "utf8"), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node): void => {
      if (
        ts.isTypeReferenceNode(node) &&
        node.typeName.getText(sf) === "Pick" &&
        node.typeArguments?.[0]?.getText(sf) === "Runner" &&
        /"ports"/.test(node.typeArguments[1]?.getText(sf) ?? "")
      )
        out.push(`${name}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}`);
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out;
}

test("task modules: a port names the task's ports it uses (TaskPort<K, P>), never all of them", () => {
  assert.deepEqual(pickingAllPorts(), [], "these hand over every port: use TaskPort<state keys, port keys>");
});
