import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { agentSummary, mergeAgentSources, parseAgentDefinition } from "../../src/core/crew/crew-agents.js";
import { bundledAgentsDir, discoverAgents } from "../../src/extensions/crew-agents.js";

const def = (fm: string, body = "Do the work.") => `---\n${fm}\n---\n${body}\n`;

test("a definition parses every frontmatter field; bad optional fields warn and fall back", () => {
  const { agent, warnings } = parseAgentDefinition(
    def(
      "name: scout\ndescription: Finds things\nmodel: fake/m1\nthinking: low\ntools: read, grep\nrole: reviewer\nisolated: true\ninteractive: true",
    ),
    "/x/scout.md",
    "project",
  );
  assert.deepEqual(warnings, []);
  assert.deepEqual(agentSummary(agent!), {
    name: "scout",
    description: "Finds things",
    model: "fake/m1",
    thinking: "low",
    tools: ["read", "grep"],
    role: "reviewer",
    isolated: true,
    interactive: true,
    machine: null,
    source: "project",
  });
  assert.equal(agent!.prompt, "Do the work.");
  const loose = parseAgentDefinition(
    def("name: w\ndescription: d\nmodel: nope\nthinking: huge\nrole: boss\ncolor: red"),
    "/x/w.md",
    "user",
  );
  assert.equal(loose.agent?.model, undefined);
  assert.equal(loose.agent?.role, "worker");
  assert.deepEqual(
    loose.warnings.map((w) => w.message.split(" ")[0]),
    ["unknown", "model", "thinking", "role"],
  );
});

test("machine: names a configured machine label; a bad one warns and the subagent runs here", () => {
  const remote = parseAgentDefinition(def("name: far\ndescription: d\nmachine: builder-01"), "/x/far.md", "project");
  assert.deepEqual(remote.warnings, []);
  assert.equal(remote.agent!.machine, "builder-01");
  assert.equal(agentSummary(remote.agent!)["machine"], "builder-01");
  for (const bad of ["machine: -oProxyCommand=x", "machine: two words", "machine: [a, b]", "machine: 7"]) {
    const r = parseAgentDefinition(def(`name: far\ndescription: d\n${bad}`), "/x/far.md", "project");
    assert.equal(r.agent!.machine, undefined, bad);
    assert.equal(r.warnings.length, 1, bad);
    assert.match(r.warnings[0]!.message, /machine must be a machine label .*the subagent runs here/, bad);
  }
});

test("unusable files are warnings naming the problem", () => {
  assert.match(parseAgentDefinition("just text", "/a.md", "user").warnings[0]!.message, /no YAML frontmatter/);
  assert.match(parseAgentDefinition(def("name: [x"), "/a.md", "user").warnings[0]!.message, /not valid YAML/);
  assert.match(parseAgentDefinition(def("description: d"), "/a.md", "user").warnings[0]!.message, /name is required/);
  assert.match(
    parseAgentDefinition(def("name: my agent\ndescription: d"), "/a.md", "user").warnings[0]!.message,
    /whitespace/,
  );
  assert.match(parseAgentDefinition(def("name: a"), "/a.md", "user").warnings[0]!.message, /description is required/);
});

test("merge: the higher-priority source wins; a duplicate inside one source is skipped with a warning", () => {
  const a = (name: string, source: "project" | "user", file: string) =>
    parseAgentDefinition(def(`name: ${name}\ndescription: ${source}`), file, source).agent!;
  const merged = mergeAgentSources([
    { agents: [a("w", "project", "/p/w.md"), a("w", "project", "/p/w2.md")] },
    { agents: [a("w", "user", "/u/w.md"), a("s", "user", "/u/s.md")] },
  ]);
  assert.deepEqual(
    merged.agents.map((x) => `${x.name}:${x.description}`),
    ["s:user", "w:project"],
  );
  assert.equal(merged.warnings.length, 1);
  assert.match(merged.warnings[0]!.message, /duplicate subagent name "w"/);
});

test("discovery reads <cwd>/.pi/agents over the user's agent dir over the bundled agents", () => {
  const dir = mkdtempSync(join(tmpdir(), "crew-agents-"));
  try {
    mkdirSync(join(dir, "work", ".pi", "agents"), { recursive: true });
    mkdirSync(join(dir, "agent", "agents"), { recursive: true });
    writeFileSync(join(dir, "work", ".pi", "agents", "worker.md"), def("name: worker\ndescription: project worker"));
    writeFileSync(join(dir, "agent", "agents", "worker.md"), def("name: worker\ndescription: user worker"));
    writeFileSync(join(dir, "agent", "agents", "broken.md"), "no frontmatter");
    const { agents, warnings } = discoverAgents(join(dir, "work"), {
      PI_CODING_AGENT_DIR: join(dir, "agent"),
      HOME: dir,
    });
    assert.equal(agents.find((a) => a.name === "worker")?.description, "project worker");
    assert.ok(warnings.some((w) => w.file.endsWith("broken.md")));
    // the bundled definitions are found too (and parse without warnings)
    const bundled = discoverAgents(join(dir, "work"), { PI_CODING_AGENT_DIR: join(dir, "none"), HOME: dir });
    assert.ok(
      bundled.agents.some((a) => a.source === "bundled"),
      `no bundled agents in ${bundledAgentsDir}`,
    );
    assert.deepEqual(
      bundled.warnings.filter((w) => w.file.startsWith(bundledAgentsDir)),
      [],
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("isolated: true, false or auto; the bundled worker is auto (a worktree in a git repo), the readers are not", () => {
  for (const [v, want] of [
    ["true", true],
    ["false", false],
    ["auto", "auto"],
  ] as const) {
    const r = parseAgentDefinition(def(`name: w\ndescription: d\nisolated: ${v}`), "/x/w.md", "project");
    assert.deepEqual(r.warnings, [], v);
    assert.equal(r.agent!.isolated, want, v);
  }
  const bad = parseAgentDefinition(def("name: w\ndescription: d\nisolated: sometimes"), "/x/w.md", "project");
  assert.equal(bad.agent!.isolated, false);
  assert.match(bad.warnings[0]!.message, /isolated must be true, false or auto; false is used/);
  const dir = mkdtempSync(join(tmpdir(), "crew-agents-"));
  try {
    const { agents } = discoverAgents(dir, { PI_CODING_AGENT_DIR: join(dir, "none"), HOME: dir });
    const byName = Object.fromEntries(agents.map((a) => [a.name, a]));
    assert.equal(byName["worker"]?.source, "bundled");
    assert.equal(byName["worker"]?.isolated, "auto");
    assert.equal(agentSummary(byName["worker"]!)["isolated"], "auto");
    assert.equal(byName["scout"]?.isolated, false);
    assert.equal(byName["reviewer"]?.isolated, false);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a definition's checks and worktree (include, setup) parse; bad ones warn and are dropped; no worktree without isolation", () => {
  const { agent, warnings } = parseAgentDefinition(
    def(
      "name: checked\ndescription: d\nisolated: true\nchecks:\n  - npm test\n  - npm run lint\nworktree:\n  include: [.env, node_modules/]\n  setup: npm run build",
    ),
    "/x/checked.md",
    "project",
  );
  assert.deepEqual(warnings, []);
  assert.deepEqual(agent!.checks, ["npm test", "npm run lint"]);
  assert.deepEqual(agent!.worktree, { include: [".env", "node_modules/"], setup: "npm run build" });
  const one = parseAgentDefinition(
    def("name: c\ndescription: d\nisolated: auto\nchecks: make check"),
    "/x/c.md",
    "user",
  );
  assert.deepEqual(one.agent!.checks, ["make check"]);
  const bad = parseAgentDefinition(
    def(
      "name: b\ndescription: d\nisolated: true\nchecks: [1, 2]\nworktree:\n  include: ['# no']\n  setup: ''\n  color: red",
    ),
    "/x/b.md",
    "user",
  );
  assert.equal(bad.agent!.checks, undefined);
  assert.equal(bad.agent!.worktree, undefined);
  const said = bad.warnings.map((w) => w.message);
  for (const what of [
    /^checks must be/,
    /^unknown field "worktree\.color"/,
    /^worktree\.include must/,
    /^worktree\.setup must/,
  ])
    assert.ok(
      said.some((m) => what.test(m)),
      `${what} in ${JSON.stringify(said)}`,
    );
  const shared = parseAgentDefinition(def("name: s\ndescription: d\nworktree:\n  setup: npm ci"), "/x/s.md", "user");
  assert.equal(shared.agent!.worktree, undefined, "isolated defaults to false: no worktree to set up");
  assert.match(shared.warnings[0]!.message, /isolated: true or auto/);
});

test("definitions take spend caps (maxCost USD, maxOutputTokens, maxTurns); a bad one is dropped with a warning", () => {
  const { agent, warnings } = parseAgentDefinition(
    "---\nname: thrifty\ndescription: cheap work\nmaxCost: 2.5\nmaxOutputTokens: 20000\nmaxTurns: 0\n---\nBe brief.\n",
    "/p/thrifty.md",
    "project",
  );
  assert.equal(agent?.maxCost, 2.5);
  assert.equal(agent?.maxOutputTokens, 20000);
  assert.equal(agent?.maxTurns, undefined);
  assert.deepEqual(
    warnings.map((w) => w.message),
    ["maxTurns must be a whole number, 1 or more, got 0; no such cap"],
  );
  assert.equal(agentSummary(agent!)["maxCost"], 2.5);
  const bad = parseAgentDefinition("---\nname: x\ndescription: y\nmaxCost: lots\n---\n", "/p/x.md", "project");
  assert.equal(bad.agent?.maxCost, undefined);
  assert.match(bad.warnings[0]!.message, /maxCost must be a positive number of USD/);
});
