// A cap's summary never shows the spend rounded down to the limit: a spend past the cap reads past it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { capNeeds } from "../../src/core/budget.js";

test("a cost spend just past the cap is shown past it, not rounded to the limit", () => {
  const s = capNeeds({ cap: "cost", limit: 0.05, spent: 0.0512, step: 0.05 });
  assert.doesNotMatch(s, /\(0\.05 \$ spent\)/, s);
  assert.match(s, /^cost cap 0\.05 \$ reached \(0\.051 \$ spent\); respond to continue with another 0\.05 \$$/, s);
  // Rounding up to a cent is honest when it stays above the limit; whole amounts read as before.
  assert.equal(capNeeds({ cap: "cost", limit: 5, spent: 7, step: 5 }).includes("(7.00 $ spent)"), true);
  assert.match(capNeeds({ cap: "cost", limit: 1, spent: 1.004, step: 1 }), /\(1\.004 \$ spent\)/);
});
