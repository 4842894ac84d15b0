// The socket methods compute outcomes (a landing found or made, a check run's receipts, a journal record, a new
// owner) and hand them to the one writer of a task: its runner for a live task, the store for a closed one. No
// handler in src/daemon/methods assigns to a task's state itself. Checked from the source with the TypeScript AST.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { repoRoot } from "../helpers/pi.js";

const methodsDir = join(repoRoot, "src", "daemon", "methods");

/** Names a handler holds a task's runner or record by. */
const TASK_ROOTS = new Set(["live", "rec", "runner", "r"]);
/** The runner's fields whose write belongs to the runner wherever they are reached from. */
const RUNNER_FIELDS = new Set(["chain", "live", "result", "landing", "checkRun"]);

/** `a.b.c` → ["a", "b", "c"]; undefined when the chain is not plain names (a call, `this`, an index...). */
function pathOf(e: ts.Expression): string[] | undefined {
  if (ts.isIdentifier(e)) return [e.text];
  if (ts.isPropertyAccessExpression(e)) {
    const head = pathOf(e.expression);
    return head ? [...head, e.name.text] : undefined;
  }
  if (ts.isElementAccessExpression(e)) {
    const head = pathOf(e.expression);
    return head ? [...head, "[]"] : undefined;
  }
  if (ts.isNonNullExpression(e) || ts.isParenthesizedExpression(e)) return pathOf(e.expression);
  return undefined;
}

/** A write to a task's state: its path starts at a runner or record, or goes through a runner's field. */
function isTaskWrite(path: string[]): boolean {
  if (path.length < 2) return false; // a plain variable
  return TASK_ROOTS.has(path[0]!) || path.slice(1).some((p) => RUNNER_FIELDS.has(p));
}

const ASSIGN = new Set([
  ts.SyntaxKind.EqualsToken,
  ts.SyntaxKind.PlusEqualsToken,
  ts.SyntaxKind.MinusEqualsToken,
  ts.SyntaxKind.QuestionQuestionEqualsToken,
  ts.SyntaxKind.BarBarEqualsToken,
  ts.SyntaxKind.AmpersandAmpersandEqualsToken,
]);

/** Every assignment, `delete`, `++`/`--` of a task's state in `text`, as `file:line lhs`. */
function writesIn(name: string, text: string): string[] {
  const sf = ts.createSourceFile(name, text, ts.ScriptTarget.Latest, true);
  const out: string[] = [];
  const note = (target: ts.Expression, node: ts.Node) => {
    const path = pathOf(target);
    if (path && isTaskWrite(path))
      out.push(`${name}:${sf.getLineAndCharacterOfPosition(node.getStart(sf)).line + 1} ${path.join(".")}`);
  };
  const visit = (node: ts.Node): void => {
    if (ts.isBinaryExpression(node) && ASSIGN.has(node.operatorToken.kind)) note(node.left, node);
    if (ts.isDeleteExpression(node)) note(node.expression, node);
    if (
      (ts.isPrefixUnaryExpression(node) || ts.isPostfixUnaryExpression(node)) &&
      (node.operator === ts.SyntaxKind.PlusPlusToken || node.operator === ts.SyntaxKind.MinusMinusToken)
    )
      note(node.operand, node);
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

const files = readdirSync(methodsDir).filter((n) => n.endsWith(".ts"));

test("no socket method writes a task's state: it hands its outcome to the task's writer (runner or store)", () => {
  const found = files.flatMap((n) => writesIn(n, readFileSync(join(methodsDir, n), "utf8")));
  assert.deepEqual(found, [], "these write a task's state from a handler: return the outcome to the runner instead");
});

test("the check sees the writes it forbids (so an empty list means none, not a blind scan)", () => {
  assert.deepEqual(
    writesIn(
      "x.ts",
      [
        "live.chain = run.then(() => undefined);",
        "t.live.result = result;",
        "rec.landing = landing;",
        "rec.checkRun = { cycle: 1, at: 2, receipts: [] };",
        "delete live.knownRepo;",
        "x.live.result ??= r;",
        "live.rec.cycle++;",
        "const rec2 = { ...rec, landing };", // a new value, not a write
        "let n = 0; n = 1;", // a plain variable
        "out.results = [];", // not a task
      ].join("\n"),
    ),
    [
      "x.ts:1 live.chain",
      "x.ts:2 t.live.result",
      "x.ts:3 rec.landing",
      "x.ts:4 rec.checkRun",
      "x.ts:5 live.knownRepo",
      "x.ts:6 x.live.result",
      "x.ts:7 live.rec.cycle",
    ],
  );
  assert.ok(files.includes("land-methods.ts") && files.length > 5, "the scan reads src/daemon/methods");
});
