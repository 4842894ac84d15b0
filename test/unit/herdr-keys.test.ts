// The keys the Herdr runtime sends are keys Herdr's parser reads (modelled by the fake Herdr's parse_key_combo);
// a name it cannot read is refused by name before Herdr sees it (Herdr would answer invalid_key).
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseKeyCombo } from "../../fixtures/fake-herdr/keys.js";
import { DshError } from "../../src/core/errors.js";
import { herdrKey } from "../../src/runtime/herdr/index.js";

test("every tmux-style or Herdr key name the runtime maps is one Herdr reads", () => {
  const names = [
    "Enter",
    "Escape",
    "Tab",
    "BTab",
    "BSpace",
    "Up",
    "Down",
    "Left",
    "Right",
    "Space",
    "C-c",
    "C-d",
    "M-x",
    "F1",
    "F12",
    "a",
    "/",
    "esc",
    "ctrl+c",
    "shift+tab",
    "minus",
  ];
  for (const name of names) {
    const combo = herdrKey(name);
    assert.notEqual(parseKeyCombo(combo), undefined, `${name} → ${combo}, which Herdr cannot read`);
  }
  assert.equal(herdrKey("Escape"), "esc");
  assert.equal(herdrKey("C-c"), "ctrl+c");
  assert.equal(herdrKey("M-x"), "alt+x");
});

test("a key Herdr has no name for is refused by name, not lowercased into one it rejects", () => {
  for (const name of ["PageUp", "PPage", "Home", "NotAKey", "\t"]) {
    assert.throws(
      () => herdrKey(name),
      (e: unknown) => e instanceof DshError && e.code === "BAD_PARAMS" && e.message.includes(JSON.stringify(name)),
      name,
    );
    assert.equal(parseKeyCombo(name.toLowerCase()), undefined, `the fake agrees: ${name} is not a Herdr key`);
  }
});
