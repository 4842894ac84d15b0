// The browser board against a real daemon (headless runtime), real pi children on the scripted model, a real git
// repository and a real Chromium (Debian's, driven by playwright-core): refusals over real HTTP, cards that follow
// status changes by server-sent events, a task's page (report inert, diff, checks), comments sent as one follow-up,
// and landing from the page. One daemon and one browser serve every test.
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, statSync } from "node:fs";
import { request } from "node:http";
import { connect as netConnect, createServer as createNetServer } from "node:net";
import { join } from "node:path";
import { chromium, type Browser, type Page } from "playwright-core";
import type { Script } from "../../fixtures/scripted-model/script.js";
import { boardAddressPath, boardTokenPath } from "../../src/board/token.js";
import { git } from "../helpers/git.js";
import { runCli } from "../helpers/cli.js";
import { startHarness, type Harness } from "./daemon-harness.js";
import { connect } from "../../src/client/index.js";
import { runDaemon } from "../../src/daemon/daemon.js";
import { setConfigValue } from "../../src/store/config.js";

const CHROMIUM = process.env.DSH_TEST_CHROMIUM ?? "/usr/bin/chromium";
/** A directory to save the board's screenshots in (docs/ when making the README's pictures); unset: none. */
const SHOTS = process.env.DSH_BOARD_SCREENSHOTS;
const HOSTILE =
  'Done.\n\n<script>window.__pwned = "script"</script>\n\n<img src="x" onerror="window.__pwned = \'img\'">\n\n' +
  '[click me](javascript:window.__pwned="link")\n\n<a href="javascript:window.__pwned=\'a\'" id="evil">raw link</a>\n\n' +
  "<iframe src=\"javascript:parent.__pwned='frame'\"></iframe>";

const script: Script = {
  conversations: [
    {
      name: "live",
      match: "[b-live]",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "live.txt", content: "one\ntwo\nthree\n" } }], delayMs: 300 },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "wrote live.txt" } }] },
        {
          match: "Review comments on your diff",
          toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "addressed the comments" } }],
        },
      ],
    },
    {
      name: "hostile",
      match: "[b-hostile]",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "h.txt", content: "<script>x</script>\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: HOSTILE } }] },
      ],
    },
    {
      name: "checked",
      match: "[b-check]",
      steps: [
        { toolCalls: [{ name: "write", arguments: { path: "c.txt", content: "c\n" } }] },
        { toolCalls: [{ name: "crew_report", arguments: { outcome: "completed", report: "wrote c.txt" } }] },
      ],
    },
  ],
};

let h: Harness;
let browser: Browser;
let page: Page;
let base: string;
let token: string;
let port: number;

before(async () => {
  // Priced (USD per million tokens), so the cards and the spend chart show costs.
  h = await startHarness(
    script,
    { runtime: "headless" },
    {},
    { cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 } },
  );
  base = (JSON.parse(readFileSync(boardAddressPath(h.home), "utf8")) as { url: string }).url;
  port = Number(new URL(base).port);
  token = readFileSync(boardTokenPath(h.home), "utf8").trim();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  page = await browser.newPage();
  page.on("pageerror", (e) => console.error("page error:", e.message));
});

after(async () => {
  await browser?.close();
  await h?.close();
});

/** A raw HTTP request (node:http sets the Host header we give, as a browser of another site would send its own). */
function raw(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: string,
): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers }, (res) => {
      let text = "";
      res.on("data", (d: Buffer) => (text += d.toString("utf8")));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

const cookie = () => `dsh_board=${token}`;
const cli = (args: string[]) =>
  runCli(args, { env: { ...process.env, ...h.childEnv, DSH_HERDR_HOME: h.home }, timeoutMs: 60_000 });

async function spawnDone(tag: string, extra: Record<string, unknown> = {}): Promise<string> {
  const { taskId } = await h.spawn({ prompt: `${tag} do it`, isolated: true, runtime: "headless", ...extra });
  const r = await h.wait(taskId);
  assert.equal(r.status, "completed", JSON.stringify(r));
  return taskId;
}

test("refused: no token, a wrong token, a wrong Host, a cross-origin or form POST; the token becomes a strict cookie", async () => {
  const host = `127.0.0.1:${port}`;
  assert.equal((await raw("GET", "/", { host })).status, 401);
  assert.equal((await raw("GET", "/api/tasks", { host })).status, 401);
  assert.equal((await raw("GET", "/?token=" + "x".repeat(43), { host })).status, 401);
  assert.equal((await raw("GET", "/api/tasks", { host, cookie: "dsh_board=" + "y".repeat(43) })).status, 401);
  // DNS rebinding: another site's name resolved to 127.0.0.1, even with a good cookie.
  assert.equal((await raw("GET", "/api/tasks", { host: `evil.example:${port}`, cookie: cookie() })).status, 421);
  const ok = await raw("GET", "/?token=" + token, { host });
  assert.equal(ok.status, 303);
  assert.equal(ok.headers.location, "/");
  const set = String(ok.headers["set-cookie"]);
  assert.match(set, /HttpOnly/);
  assert.match(set, /SameSite=Strict/);
  assert.equal((await raw("GET", "/api/tasks", { host, cookie: cookie() })).status, 200);
  // No CORS: nothing says another origin may read.
  assert.equal(
    (await raw("GET", "/api/tasks", { host, cookie: cookie(), origin: "http://evil.example" })).headers[
      "access-control-allow-origin"
    ],
    undefined,
  );
  // State changes: another origin, no origin, or a form's content type are refused before anything runs.
  const id = await spawnDone("[b-check]");
  const post = (headers: Record<string, string>) =>
    raw("POST", `/api/task/${id}/close`, { host, cookie: cookie(), ...headers }, "{}");
  assert.equal((await post({ origin: "http://evil.example", "content-type": "application/json" })).status, 403);
  assert.equal((await post({ "content-type": "application/json" })).status, 403);
  assert.equal((await post({ origin: `http://${host}`, "content-type": "text/plain" })).status, 415);
  assert.ok(h.daemon.supervisor.tasks.has(id), "a refused close closed nothing");
  // Files by a fixed list: no client-given path reaches the disk.
  assert.equal((await raw("GET", "/assets/..%2f..%2fpackage.json", { host, cookie: cookie() })).status, 404);
  assert.equal((await raw("GET", "/assets/marked.js", { host, cookie: cookie() })).status, 200);
  assert.equal((await raw("GET", `/api/task/${id}/checks/0/log`, { host, cookie: cookie() })).status, 404);
});

test("board --json prints the URL with the token; --rotate makes the old one (and its cookie) invalid", async () => {
  const r = await cli(["board", "--json"]);
  assert.equal(r.code, 0, r.err);
  const url = (JSON.parse(r.out) as { url: string }).url;
  assert.equal(url, `${base}?token=${token}`);
  const rot = await cli(["board", "--rotate", "--json"]);
  assert.equal(rot.code, 0, rot.err);
  const fresh = new URL((JSON.parse(rot.out) as { url: string }).url).searchParams.get("token")!;
  assert.notEqual(fresh, token);
  assert.equal(statSync(boardTokenPath(h.home)).mode & 0o777, 0o600, "the token is the user's alone");
  const host = `127.0.0.1:${port}`;
  assert.equal((await raw("GET", "/api/tasks", { host, cookie: cookie() })).status, 401);
  token = fresh;
  assert.equal((await raw("GET", "/api/tasks", { host, cookie: cookie() })).status, 200);
});

test("a task appears on the board and moves by its status within a second; its diff renders; a line comment reaches the child; land from the page lands", async () => {
  const t0 = Date.now();
  await page.goto(`${base}?token=${token}`);
  await page.waitForSelector("#live:not(.off)");
  // Offline and small: the page, its libraries and the live stream in well under a second (generous under CI load).
  const loadMs = Date.now() - t0;
  console.log(`board page loaded and live in ${loadMs} ms`);
  assert.ok(loadMs < 3000, `the board took ${loadMs} ms to load`);
  const { taskId } = await h.spawn({ prompt: "[b-live] do it", isolated: true, runtime: "headless" });
  await page.waitForSelector(`.card[data-task-id="${taskId}"]`, { timeout: 5000 });
  // Settled: the card is in its column within a second of the daemon's result (events, no polling).
  const settled = h.wait(taskId).then(() => Date.now());
  const shown = page
    .waitForSelector(`.column[data-column="completed"] .card[data-task-id="${taskId}"]`, { timeout: 90_000 })
    .then(() => Date.now());
  const [tSettled, tShown] = await Promise.all([settled, shown]);
  assert.ok(tShown - tSettled < 1000, `card moved ${tShown - tSettled} ms after the settle`);
  const card = await page.textContent(`.card[data-task-id="${taskId}"]`);
  assert.match(card ?? "", /landable/);

  // Its page: the diff (diff2html), then a comment on a line, sent as one follow-up.
  await page.click(`.card[data-task-id="${taskId}"]`);
  await page.waitForSelector(".d2h-file-wrapper");
  assert.match((await page.textContent(".d2h-file-wrapper")) ?? "", /live\.txt[\s\S]*two/);
  await page.selectOption("#diff-format", "side-by-side");
  await page.waitForSelector(".d2h-files-diff");
  await page.selectOption("#diff-format", "line-by-line");
  await page.waitForSelector(".d2h-file-wrapper .d2h-code-linenumber");
  await page.click(".d2h-file-wrapper tr:nth-child(3) .d2h-code-linenumber");
  await page.fill(".comment-text", "say 2 instead of two");
  await page.click(".comment-add");
  if (SHOTS) await page.screenshot({ path: join(SHOTS, "board-task.png"), fullPage: true });
  await page.click("#btn-send-comments");
  await page.waitForSelector("#comments ~ .answer.ok");
  const r2 = await h.waitFor(taskId, (r) => r.status === "completed" && r.summary.includes("addressed"), "cycle 2");
  assert.ok(r2);
  const asked = h.model
    .requests()
    .map((q) => JSON.stringify(q.body))
    .find((b) => b.includes("Review comments on your diff"));
  assert.ok(asked, "the follow-up reached the model as a prompt");
  assert.match(asked!, /live\.txt line \d+: say 2 instead of two/);

  // Land from the page: the user's branch holds the commit.
  await page.reload();
  await page.waitForSelector("#btn-land");
  await page.click("#btn-land");
  await page.waitForSelector("#btn-land >> xpath=../../pre[contains(@class,'ok')]", { timeout: 60_000 });
  const answer = JSON.parse((await page.textContent("section pre.answer.ok")) ?? "{}") as {
    results: { landing: { landedAs: string } }[];
  };
  const landedAs = answer.results[0]!.landing.landedAs;
  assert.equal(git(h.repo, "rev-parse", "HEAD").trim(), landedAs);
  assert.ok(existsSync(join(h.repo, "live.txt")));
  await page.goto(`${base}#/`);
  await page.waitForSelector(`.column[data-column="landed"] .card[data-task-id="${taskId}"]`, { timeout: 5000 });
});

test("a failed check shows ✗ on the card and the page; its log is served from the task's directory; spend and the status latency of the last hour at a glance", async () => {
  const id = await spawnDone("[b-check]", { checks: ["echo checking; exit 3"] });
  await page.goto(`${base}#/`);
  const sel = `.card[data-task-id="${id}"] .checks`;
  await page.waitForSelector(sel, { timeout: 5000 });
  assert.equal((await page.textContent(sel))?.trim(), "checks ✗");
  await page.goto(`${base}#/task/${id}`);
  await page.waitForSelector(".check");
  await page.click(".check button");
  await page.waitForSelector(".check-log:has-text('checking')");
  // Spend at a glance: per day and per task, from the usage pi recorded.
  await page.goto(`${base}#/`);
  await page.click("#spend summary");
  await page.waitForSelector("#spend .bar-row");
  assert.match((await page.textContent("#spend .chart")) ?? "", /\d{4}-\d{2}-\d{2}\s*\$0\.0\d*[1-9]\d* · \d+ tok/);
  // Status latency at a glance, from the daemon's own counters: the settles of this file's tasks, settle → announcement.
  const host = `127.0.0.1:${port}`;
  const lat = JSON.parse((await raw("GET", "/api/latency", { host, cookie: cookie() })).body) as {
    bucketMs: number;
    buckets: { start: number; count: number; p50?: number; p99?: number }[];
  };
  assert.equal(lat.bucketMs, 5 * 60_000);
  assert.equal(lat.buckets.length, 12);
  const counted = lat.buckets.filter((b) => b.count > 0);
  const settles = counted.reduce((n, b) => n + b.count, 0);
  console.log(`status latency (settle → announcement): ${JSON.stringify(counted)}`);
  assert.ok(settles >= 2, `the daemon counted ${settles} settles`);
  for (const b of counted) assert.ok(b.p50! >= 0 && b.p99! >= b.p50! && b.p99! < 10_000, JSON.stringify(b));
  await page.waitForSelector("#spend .latency svg rect.p50");
  assert.match((await page.textContent("#spend .latency")) ?? "", new RegExp(`${settles} settles · worst p99 \\d+ ms`));
});

test("a hostile report renders inert: no script ran, no javascript: link, no handler", async () => {
  const id = await spawnDone("[b-hostile]");
  await page.goto(`${base}#/task/${id}`);
  await page.waitForSelector(".report");
  await page.waitForSelector(".d2h-file-wrapper");
  const report = (await page.innerHTML(".report")) ?? "";
  assert.match(report, /Done\./);
  assert.doesNotMatch(report, /<script|onerror|javascript:|<iframe/i);
  const links = await page.$$(".report a");
  for (const a of links) await a.click().catch(() => undefined);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(await page.evaluate(() => (globalThis as Record<string, unknown>)["__pwned"]), undefined);
  // The child's file with a script tag is text in the diff.
  assert.match((await page.textContent(".d2h-file-wrapper")) ?? "", /<script>x<\/script>/);
  if (SHOTS) {
    // The board after this file's tasks: one landed, three to land (one with a failed check).
    await page.goto(`${base}#/`);
    await page.waitForSelector(`.card[data-task-id="${id}"]`);
    await page.screenshot({ path: join(SHOTS, "board.png") });
  }
});

test("an owner pi's task is read-only on the board unless config board.mayActOnOwnerTasks allows it", async () => {
  const owner = await connect(h.home, { kind: "owner", ownerId: "sess-board-owner", timeoutMs: 30_000 });
  let id: string;
  try {
    ({ taskId: id } = await owner.request("task.spawn", {
      cwd: h.repo,
      model: h.modelName,
      prompt: "[b-check] for an owner",
      isolated: true,
      runtime: "headless",
    }));
  } finally {
    owner.close();
  }
  await h.wait(id);
  const host = `127.0.0.1:${port}`;
  const api = (path: string) => raw("GET", path, { host, cookie: cookie() });
  assert.equal((JSON.parse((await api(`/api/task/${id}`)).body) as { mayAct: boolean }).mayAct, false);
  const refused = await raw(
    "POST",
    `/api/task/${id}/close`,
    { host, cookie: cookie(), origin: `http://${host}`, "content-type": "application/json" },
    "{}",
  );
  assert.equal((JSON.parse(refused.body) as { error: { code: string } }).error.code, "FORBIDDEN");
  assert.ok(h.daemon.supervisor.tasks.has(id), "a refused close closed nothing");
  await page.goto(`${base}#/`);
  await page.waitForSelector(`.card[data-task-id="${id}"]:has-text("read-only")`, { timeout: 5000 });
  // A person allows it: the daemon reloads its config and the same request closes the task.
  await setConfigValue(h.home, "board.mayActOnOwnerTasks", true);
  const deadline = Date.now() + 10_000;
  while (!(JSON.parse((await api(`/api/task/${id}`)).body) as { mayAct: boolean }).mayAct) {
    assert.ok(Date.now() < deadline, "the daemon did not take the config change");
    await new Promise((r) => setTimeout(r, 100));
  }
  const closed = await raw(
    "POST",
    `/api/task/${id}/close`,
    { host, cookie: cookie(), origin: `http://${host}`, "content-type": "application/json" },
    "{}",
  );
  assert.equal(closed.status, 200, closed.body);
  assert.equal((JSON.parse(closed.body) as { status: string }).status, "closed");
});

test("the page reconnects to a restarted daemon by itself and shows what changed meanwhile", async () => {
  await page.goto(`${base}#/`);
  await page.waitForSelector("#live:not(.off)");
  h.cli.close();
  await h.daemon.stop();
  await page.waitForSelector("#live.off", { timeout: 10_000 });
  h.daemon = await runDaemon(h.home, {
    childEnv: h.childEnv,
    config: { readinessTimeoutMs: 60_000, runtime: "headless" },
  });
  h.cli = await connect(h.home, { kind: "cli", timeoutMs: 120_000 });
  const again = JSON.parse(readFileSync(boardAddressPath(h.home), "utf8")) as { url: string };
  assert.equal(again.url, base, "the restarted daemon serves the board where it was");
  await page.waitForSelector("#live:not(.off)", { timeout: 15_000 });
  // A task spawned after the restart reaches the already open page.
  const { taskId } = await h.spawn({ prompt: "[b-check] after the restart", isolated: true, runtime: "headless" });
  await page.waitForSelector(`.card[data-task-id="${taskId}"]`, { timeout: 10_000 });
  await h.wait(taskId);
});

test("board.socket: the daemon serves the board on a Unix socket, `board` prints the ssh -L line, and a page through a forwarded port is live", async () => {
  h.cli.close();
  await h.daemon.stop();
  h.daemon = await runDaemon(h.home, {
    childEnv: h.childEnv,
    config: { readinessTimeoutMs: 60_000, runtime: "headless", board: { socket: true } },
  });
  h.cli = await connect(h.home, { kind: "cli", timeoutMs: 120_000 });
  const socketPath = join(h.home, "board.sock");
  assert.equal(statSync(socketPath).mode & 0o777, 0o600);
  const json = await cli(["board", "--json"]);
  assert.equal(json.code, 0, json.err);
  const link = JSON.parse(json.out) as { url: string; ssh: string };
  assert.match(link.ssh, new RegExp(`^ssh -N -L 8080:${socketPath.replace(/[.]/g, "\\.")} \\S+$`));
  assert.equal(link.url, `http://localhost:8080/?token=${token}`);
  const plain = await cli(["board", "--no-open"]);
  assert.equal(plain.code, 0, plain.err);
  assert.match(
    plain.out,
    /on your laptop, run:\n {2}ssh -N -L 8080:\S+ \S+\nthen open:\n {2}http:\/\/localhost:8080\/\?token=/,
  );
  // What `ssh -L` does on the laptop: a local port whose connections are carried to the socket (here in-process).
  const piped = new Set<import("node:net").Socket>();
  const forward = createNetServer((c) => {
    const s = netConnect(socketPath);
    piped.add(c).add(s);
    c.pipe(s).pipe(c);
    c.on("error", () => s.destroy());
    s.on("error", () => c.destroy());
  });
  await new Promise<void>((r) => forward.listen(0, "127.0.0.1", r));
  const laptopPort = (forward.address() as { port: number }).port;
  try {
    await page.goto(`http://localhost:${laptopPort}/?token=${token}`);
    await page.waitForSelector("#live:not(.off)", { timeout: 15_000 });
    const { taskId } = await h.spawn({ prompt: "[b-check] over the socket", isolated: true, runtime: "headless" });
    await page.waitForSelector(`.card[data-task-id="${taskId}"]`, { timeout: 10_000 });
    await h.wait(taskId);
  } finally {
    await page.goto("about:blank");
    forward.close();
    for (const c of piped) c.destroy();
  }
});
