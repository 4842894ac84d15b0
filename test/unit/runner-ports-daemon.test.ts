// Recovery and the socket methods act on a task through narrow ports (a `Pick<Runner, ...>` or a small interface),
// never the whole runner, and recovery feeds the task's machine only through the runner (it hands it the events it
// decided; the runner alone dispatches them). Checked from the source, so neither can quietly come back.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { repoRoot } from "../helpers/pi.js";

const recoverDir = join(repoRoot, "src", "daemon", "recover");
const methodsDir = join(repoRoot, "src", "daemon", "methods");

/**
 * Functions outside recovery that still take the whole `Runner`, as `folder/file:function`. This list may only
 * shrink: narrow a function and take it out; a function not listed here must not take the whole runner.
 */
const STILL_WHOLE = new Set(["methods/methods.ts:steerOrRefuse"]);

function sources(dir: string): { name: string; sf: ts.SourceFile }[] {
  const folder = dir.split("/").pop()!;
  return readdirSync(dir)
    .filter((n) => n.endsWith(".ts"))
    .map((n) => ({
      name: `${folder}/${n}`,
      sf: ts.createSourceFile(n, readFileSync(join(dir, n), "utf8"), ts.ScriptTarget.Latest, true),
    }));
}

/** `folder/file:function` for every function with a parameter typed exactly `Runner`. */
function takingWholeRunner(): string[] {
  const out: string[] = [];
  for (const { name, sf } of [...sources(recoverDir), ...sources(methodsDir)]) {
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

/** `folder/file:line` of every call `x.dispatch(...)` or `x.dispatchRemote(...)` in recovery. */
function recoveryDispatches(): string[] {
  const out: string[] = [];
  for (const { name, sf } of sources(recoverDir)) {
    const visit = (node: ts.Node): void => {
      if (
        ts.isCallExpression(node) &&
        ts.isPropertyAccessExpression(node.expression) &&
        /^dispatch/.test(node.expression.name.text)
      )
        out.push(`${name}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1}`);
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return out;
}

test("recovery and socket methods: no function takes the whole Runner unless it is on the (shrinking) list", () => {
  const regressed = takingWholeRunner().filter((f) => !STILL_WHOLE.has(f));
  assert.deepEqual(regressed, [], "these take the whole Runner: give them a narrow port (Pick<Runner, ...>)");
});

test("recovery and socket methods: the list of functions still taking the whole Runner names none narrowed", () => {
  const found = new Set(takingWholeRunner());
  const stale = [...STILL_WHOLE].filter((f) => !found.has(f));
  assert.deepEqual(stale, [], "these no longer take the whole Runner: take them off the list");
});

test("recovery feeds the task's machine only through the runner: no dispatch call in src/daemon/recover", () => {
  assert.deepEqual(recoveryDispatches(), [], "recovery returns its events; the runner (restore) feeds them");
});
