// The owner extension reads owner.mayLand from the home's config.json once at load: crew_land exists only then.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ownerHome, ownerMayLand } from "../../src/extensions/owner-config.js";
import { callLine, resultLines } from "../../src/extensions/tool-render.js";

test("ownerMayLand: true only when config.json says owner.mayLand true; the home as the socket finds it", () => {
  const home = mkdtempSync(join(tmpdir(), "dsh-owner-cfg-"));
  try {
    const env = { DSH_HERDR_HOME: home };
    assert.equal(ownerMayLand(env), false, "no config.json");
    writeFileSync(join(home, "config.json"), JSON.stringify({ owner: { mayLand: true } }));
    assert.equal(ownerMayLand(env), true);
    writeFileSync(join(home, "config.json"), JSON.stringify({ owner: { mayLand: "yes" } }));
    assert.equal(ownerMayLand(env), false);
    writeFileSync(join(home, "config.json"), "{broken");
    assert.equal(ownerMayLand(env), false);
    assert.equal(ownerHome({ DSH_HERDR_SOCKET: "/run/x/daemon.sock" }), "/run/x");
    assert.equal(ownerHome({ HOME: "/home/u" }), "/home/u/.dsh/herdr");
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
});

test("crew_land in the TUI: one call line, one confirmation naming the commit", () => {
  const theme = { bold: (t: string) => t, fg: (_c: string, t: string) => t };
  const text = (pieces: [string, unknown?][]) => pieces.map((p) => p[0]).join("");
  assert.equal(
    text(callLine("crew_land", { subagent_id: "a1b2", check: true }, theme)),
    "crew_land a1b2 · checks first",
  );
  const out = {
    content: [
      {
        type: "text",
        text: JSON.stringify({
          subagent_id: "tabc",
          landed: true,
          landedAs: "0123456789abcdef",
          said: "a fast-forward",
        }),
      },
    ],
  };
  assert.deepEqual(resultLines("crew_land", out, false, theme).map(text), [
    "landed tabc as 0123456789ab · a fast-forward",
  ]);
  assert.deepEqual(
    resultLines(
      "crew_land",
      { content: [{ type: "text", text: '{"error":"LAND_CONFLICT: a.txt"}' }] },
      true,
      theme,
    ).map(text),
    ["LAND_CONFLICT: a.txt"],
  );
});
