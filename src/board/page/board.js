// The board's page: cards by column from /api/tasks, kept current by /api/events (server-sent events), and a task's
// page (#/task/ID). Every string from a task is put in with textContent; a report's Markdown goes through DOMPurify.
/* global marked, DOMPurify, Diff2HtmlUI */
(() => {
  const cards = new Map();
  /** Cards a column shows at first; "show more" adds as many again (a thousand tasks stay one quick redraw). */
  const PAGE = 50;
  const shown = new Map();
  const live = document.getElementById("live");
  const boardView = document.getElementById("board");
  const taskView = document.getElementById("task");
  let drawQueued = false;
  let openTask = null;

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, String(v));
    }
    for (const c of children) if (c !== undefined && c !== null && c !== false) e.append(c);
    return e;
  }

  function age(ms) {
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 90) return s + "s";
    if (s < 5400) return Math.round(s / 60) + "m";
    if (s < 172800) return Math.round(s / 3600) + "h";
    return Math.round(s / 86400) + "d";
  }
  const usd = (n) => (n === undefined ? "" : "$" + n.toFixed(n < 1 ? 4 : 2));

  function cardElement(c) {
    const checks =
      c.verified === undefined
        ? null
        : el("span", { class: c.verified ? "ok checks" : "bad checks", text: c.verified ? "checks ✓" : "checks ✗" });
    let landing = null;
    if (c.landedAs) landing = el("span", { class: "ok", text: "landed " + c.landedAs.slice(0, 8) });
    else if (c.landable === true) landing = el("span", { class: "ok", text: "landable" });
    else if (c.landable === false)
      landing = el("span", { class: "bad", text: "conflicts: " + (c.conflicts || []).join(", ") });
    return el(
      "a",
      {
        class: "card",
        href: "#/task/" + encodeURIComponent(c.taskId),
        "data-task-id": c.taskId,
        "data-column": c.column,
      },
      el("div", { class: "top" }, el("span", { text: c.agent }), el("span", { class: "status", text: c.status })),
      el("div", { class: "brief", text: c.brief }),
      el(
        "div",
        { class: "meta" },
        el("span", { text: c.model }),
        c.machine ? el("span", { text: "on " + c.machine }) : null,
        c.owner && c.owner !== "cli" ? el("span", { text: "owner " + c.owner.slice(0, 12) }) : null,
        el("span", { class: "age", text: age(c.createdAt) }),
        c.cost !== undefined ? el("span", { text: usd(c.cost) }) : null,
      ),
      el(
        "div",
        { class: "facts" },
        checks,
        landing,
        c.errorCode ? el("span", { class: "bad", text: c.errorCode }) : null,
        c.readOnly ? el("span", { class: "warn", text: "read-only" }) : null,
      ),
      ...(c.siblings || []).map((s) => el("div", { class: "warn sibling", text: s })),
      c.question ? el("div", { class: "question", text: c.question }) : null,
    );
  }

  function draw() {
    drawQueued = false;
    const byColumn = new Map();
    for (const c of [...cards.values()].sort((a, b) => b.createdAt - a.createdAt)) {
      if (!byColumn.has(c.column)) byColumn.set(c.column, []);
      byColumn.get(c.column).push(c);
    }
    for (const section of boardView.querySelectorAll(".column")) {
      const column = section.dataset.column;
      const list = byColumn.get(column) || [];
      const limit = shown.get(column) || PAGE;
      const box = section.querySelector(".cards");
      // Paged: a column shows its newest cards, more on request.
      box.replaceChildren(
        ...list.slice(0, limit).map(cardElement),
        list.length > limit
          ? el("button", {
              class: "more",
              text: "+" + (list.length - limit) + " more",
              onclick: () => {
                shown.set(column, limit + PAGE);
                queueDraw();
              },
            })
          : "",
      );
    }
  }
  function queueDraw() {
    if (drawQueued) return;
    drawQueued = true;
    requestAnimationFrame(draw);
  }

  async function api(path, body) {
    const init =
      body === undefined
        ? {}
        : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
    const res = await fetch(path, { credentials: "same-origin", ...init });
    const type = res.headers.get("content-type") || "";
    const data = type.startsWith("application/json") ? await res.json() : await res.text();
    if (!res.ok)
      throw typeof data === "object" && data.error ? data.error : { code: String(res.status), message: String(data) };
    return data;
  }

  // Cards that arrive by event while a listing is on its way: applied over it (they may be newer than it).
  let arrived = null;
  async function loadBoard() {
    arrived = new Map();
    try {
      const { cards: list } = await api("/api/tasks");
      cards.clear();
      for (const c of list) cards.set(c.taskId, c);
      for (const c of arrived.values()) cards.set(c.taskId, c);
      queueDraw();
    } finally {
      arrived = null;
    }
  }

  // --- spend: cost per day and per task (the usage figures pi recorded), drawn when opened and on each settle ---
  const spend = document.getElementById("spend");
  function bars(title, rows) {
    const maxCost = Math.max(0, ...rows.map((r) => r.cost));
    const maxTokens = Math.max(0, ...rows.map((r) => r.tokens));
    const pct = (v, m) => (m > 0 ? Math.round((v / m) * 100) : 0) + "%";
    return el(
      "div",
      { class: "chart" },
      el("h3", { text: title }),
      ...rows.map((r) =>
        el(
          "div",
          { class: "bar-row" },
          el("span", { text: r.label }),
          el(
            "div",
            {},
            el("div", { class: "bar", style: "width:" + pct(r.cost, maxCost) }),
            el("div", { class: "bar tokens", style: "width:" + pct(r.tokens, maxTokens) }),
          ),
          el("span", { text: usd(r.cost) + " · " + r.tokens + " tok" }),
        ),
      ),
      rows.length ? "" : el("p", { class: "more", text: "nothing spent yet" }),
    );
  }
  // Status latency of the last hour, from the daemon's own counters: per 5-minute bucket, p50 over p99 (plain SVG).
  function svg(tag, attrs, ...children) {
    const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const c of children) e.append(c);
    return e;
  }
  function latencyChart(l) {
    const buckets = l.buckets || [];
    const count = buckets.reduce((n, b) => n + b.count, 0);
    const top = Math.max(1, ...buckets.map((b) => b.p99 || 0));
    const W = 240;
    const H = 80;
    const w = buckets.length ? W / buckets.length : W;
    const h = (v) => Math.max(1, Math.round(((v || 0) / top) * (H - 4)));
    const bars = buckets.map((b, i) => {
      const time = new Date(b.start).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
      const tip = b.count
        ? time + ": " + b.count + " settles, p50 " + b.p50 + " ms, p99 " + b.p99 + " ms"
        : time + ": none";
      return svg(
        "g",
        { "data-count": b.count },
        svg("title", {}, tip),
        b.count ? svg("rect", { class: "p99", x: i * w + 1, y: H - h(b.p99), width: w - 2, height: h(b.p99) }) : "",
        b.count ? svg("rect", { class: "p50", x: i * w + 1, y: H - h(b.p50), width: w - 2, height: h(b.p50) }) : "",
      );
    });
    const worst = Math.max(0, ...buckets.map((b) => b.p99 || 0));
    return el(
      "div",
      { class: "chart latency" },
      el("h3", { text: "status latency, last hour" }),
      svg("svg", { viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img" }, ...bars),
      el("p", {
        class: "more",
        text: count
          ? count +
            (count === 1 ? " settle" : " settles") +
            " · worst p99 " +
            worst +
            " ms (per 5 minutes: p50 dark, p99 light)"
          : "no settles in the last hour",
      }),
    );
  }
  async function loadSpend() {
    if (!spend.open) return;
    try {
      const [u, l] = await Promise.all([api("/api/usage"), api("/api/latency")]);
      spend.querySelector(".charts").replaceChildren(
        bars(
          "per day",
          u.days.map((d) => ({ label: d.day, cost: d.cost, tokens: d.tokens })),
        ),
        bars(
          "costliest tasks",
          u.tasks.map((t) => ({ label: t.agent, cost: t.cost, tokens: t.tokens })),
        ),
        latencyChart(l),
      );
    } catch (e) {
      spend.querySelector(".charts").replaceChildren(el("p", { class: "bad", text: e.code + ": " + e.message }));
    }
  }
  spend.addEventListener("toggle", loadSpend);

  function connect() {
    const es = new EventSource("/api/events");
    es.addEventListener("hello", () => {
      live.textContent = "live";
      live.className = "live";
      // Again after a reconnect: whatever happened while away (a daemon restart) is in the fresh listing.
      if (connectedBefore) {
        loadBoard().catch(() => undefined);
        if (openTask) showTask(openTask, true);
      }
      connectedBefore = true;
    });
    es.addEventListener("card", (ev) => {
      const c = JSON.parse(ev.data);
      cards.set(c.taskId, c);
      arrived?.set(c.taskId, c);
      queueDraw();
      if (openTask === c.taskId) showTask(c.taskId, true);
      if (c.settledAt) loadSpend();
    });
    es.onerror = () => {
      live.textContent = "reconnecting…";
      live.className = "live off";
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        setTimeout(connect, 2000);
      }
    };
  }

  // --- a task's page ---
  const comments = [];

  function section(title, ...children) {
    return el("section", {}, el("h2", { text: title }), ...children);
  }

  function markdown(text) {
    // marked turns Markdown into HTML (raw HTML in it too); DOMPurify keeps only inert markup (no script, no
    // handlers, no javascript: links). The page's CSP forbids inline script besides.
    const html = DOMPurify.sanitize(marked.parse(text || ""), { USE_PROFILES: { html: true } });
    const div = el("div", { class: "report" });
    div.innerHTML = html;
    return div;
  }

  function answerBox() {
    return el("pre", { class: "answer", hidden: true });
  }
  function showAnswer(box, ok, value) {
    box.hidden = false;
    box.className = "answer " + (ok ? "ok" : "bad");
    box.textContent = ok ? JSON.stringify(value, null, 2) : value.code + ": " + value.message;
  }

  function actions(r, mayAct) {
    if (!mayAct)
      return section(
        "Actions",
        el("p", { class: "warn", text: "An owner pi's task: read-only here (config board.mayActOnOwnerTasks)." }),
      );
    const id = r.taskId;
    const out = answerBox();
    const run = (what, body) => async () => {
      out.hidden = false;
      out.className = "answer";
      out.textContent = what + "…";
      try {
        showAnswer(out, true, await api("/api/task/" + encodeURIComponent(id) + "/" + what, body || {}));
      } catch (e) {
        showAnswer(out, false, e);
      }
    };
    const strategy = el(
      "select",
      { id: "land-strategy" },
      ...["", "auto", "merge", "squash", "rebase"].map((s) =>
        el("option", { value: s, text: s || "strategy: default" }),
      ),
    );
    const check = el("input", { type: "checkbox", id: "land-check" });
    return section(
      "Actions",
      el(
        "div",
        { class: "actions" },
        el("button", {
          id: "btn-land",
          text: "Land",
          onclick: () =>
            run("land", { ...(strategy.value ? { strategy: strategy.value } : {}), check: check.checked })(),
        }),
        strategy,
        el("label", {}, check, " run checks on the merged tree"),
        el("button", { id: "btn-check", text: "Check again", onclick: run("check") }),
        el("button", { id: "btn-close", text: "Close", onclick: run("close") }),
        el("button", { id: "btn-abort", text: "Abort", onclick: run("abort") }),
      ),
      out,
    );
  }

  function commentsSection(r, mayAct) {
    const list = el("div", { id: "comments" });
    const out = answerBox();
    const redraw = () =>
      list.replaceChildren(
        ...comments.map((c) => el("div", { class: "comment-note", text: c.file + ":" + c.line + ": " + c.text })),
      );
    redraw();
    const send = el("button", {
      id: "btn-send-comments",
      text: "Send comments as one follow-up",
      disabled: !mayAct,
      onclick: async () => {
        if (comments.length === 0)
          return showAnswer(out, false, {
            code: "BAD_PARAMS",
            message: "no comments yet: click a line number in the diff",
          });
        const message =
          "Review comments on your diff:\n\n" +
          comments.map((c) => "- " + c.file + " line " + c.line + ": " + c.text).join("\n") +
          "\n";
        try {
          const steer = r.status === "running" || r.status === "working";
          showAnswer(
            out,
            true,
            await api("/api/task/" + encodeURIComponent(r.taskId) + "/respond", { message, steer }),
          );
          comments.length = 0;
          redraw();
        } catch (e) {
          showAnswer(out, false, e);
        }
      },
    });
    return {
      el: section(
        "Comments",
        el("p", { class: "more", text: "Click a line number in the diff to comment on that line." }),
        list,
        send,
        out,
      ),
      redraw,
    };
  }

  function attachLineComments(container, redraw) {
    container.addEventListener("click", (ev) => {
      const cell = ev.target.closest(".d2h-code-linenumber, .d2h-code-side-linenumber");
      if (!cell) return;
      const row = cell.closest("tr");
      if (row.nextElementSibling?.classList.contains("comment-row")) return;
      const file = cell.closest(".d2h-file-wrapper").querySelector(".d2h-file-name").textContent.trim();
      const n2 = cell.querySelector(".line-num2");
      const n1 = cell.querySelector(".line-num1");
      const line = (n2?.textContent.trim() || n1?.textContent.trim() || cell.textContent.trim()).trim();
      const text = el("textarea", { class: "comment-text", placeholder: "comment on " + file + " line " + line });
      const tr = el(
        "tr",
        { class: "comment-row" },
        el(
          "td",
          { colspan: 2 },
          text,
          el("button", {
            class: "comment-add",
            text: "Add comment",
            onclick: () => {
              if (text.value.trim() === "") return;
              comments.push({ file, line, text: text.value.trim() });
              tr.remove();
              redraw();
            },
          }),
        ),
      );
      row.after(tr);
      text.focus();
    });
  }

  async function showTask(id, refresh) {
    openTask = id;
    boardView.hidden = true;
    taskView.hidden = false;
    if (!refresh) {
      comments.length = 0;
      taskView.replaceChildren(el("p", { text: "loading…" }));
    }
    let got;
    try {
      got = await api("/api/task/" + encodeURIComponent(id));
    } catch (e) {
      taskView.replaceChildren(el("p", { class: "bad", text: e.code + ": " + e.message }));
      return;
    }
    if (openTask !== id) return;
    const r = got.result;
    const report = r.result?.text || r.finalMessage || "";
    const u = r.usage || {};
    const t = r.timing || {};
    const rows = [
      ["status", r.status],
      ["model", r.agent.model],
      ["machine", r.agent.machine || "this machine"],
      ["cost", usd(u.cost)],
      ["output tokens", u.outputTokens],
      ["input tokens", u.inputTokens],
      ["turns", u.assistant],
      ["tool calls", u.toolCalls],
      ["started", t.createdAt ? new Date(t.createdAt).toLocaleString() : ""],
      ["elapsed", t.elapsedMs !== undefined ? (t.elapsedMs / 1000).toFixed(1) + " s" : ""],
      ["branch", r.worktree ? r.worktree.branch : ""],
    ].filter((x) => x[1] !== undefined && x[1] !== "");
    const cm = commentsSection(r, got.mayAct);
    const diffBox = el("div", { id: "diff" });
    const checks = (r.checks || []).map((c, i) => {
      const ok = c.exitCode === 0 && !c.cutOff;
      const log = el("pre", { class: "check-log", hidden: true });
      return el(
        "div",
        { class: "check" },
        el("span", { class: ok ? "ok" : "bad", text: (ok ? "✓ " : "✗ ") + c.command }),
        " ",
        el("span", {
          class: "more",
          text:
            (c.cutOff ? "cut off (" + c.cutOff + ")" : "exit " + c.exitCode) +
            " · " +
            (c.durationMs / 1000).toFixed(1) +
            " s",
        }),
        " ",
        el("button", {
          text: "full log",
          onclick: async () => {
            log.hidden = false;
            try {
              log.textContent = await api("/api/task/" + encodeURIComponent(r.taskId) + "/checks/" + i + "/log");
            } catch (e) {
              log.textContent = e.code + ": " + e.message;
            }
          },
        }),
        el("pre", { text: c.outputTail }),
        log,
      );
    });
    const info = [
      section(
        "Summary",
        el("p", { class: "summary", text: r.status + " · " + r.summary }),
        r.brief ? el("p", { class: "more", text: "brief: " + r.brief }) : null,
        r.error ? el("p", { class: "bad", text: r.error.code + ": " + r.error.message }) : null,
      ),
      section("Report", markdown(report)),
      // pi's own last words of the cycle, when they are not the report itself (a failure's message, a question).
      r.finalMessage && r.finalMessage !== report
        ? section("Last message", el("pre", { class: "last-message", text: r.finalMessage }))
        : "",
    ];
    const more = [
      section(
        "Checks",
        ...(checks.length ? checks : [el("p", { text: "no checks ran" })]),
        r.verified === undefined
          ? null
          : el("p", { class: r.verified ? "ok" : "bad", text: r.verified ? "verified ✓" : "not verified ✗" }),
      ),
      section(
        "Usage and timing",
        el("table", {}, ...rows.map(([k, v]) => el("tr", {}, el("th", { text: k }), el("td", { text: String(v) })))),
      ),
      r.warnings?.length ? section("Warnings", ...r.warnings.map((w) => el("p", { class: "warn", text: w }))) : "",
    ];
    const infoBox = document.getElementById("task-info");
    const moreBox = document.getElementById("task-more");
    if (refresh && infoBox && moreBox) {
      // A status change while the page is open: its facts are redrawn; the diff, comments being written and the
      // answer of an action stay as they are.
      infoBox.replaceChildren(...info);
      moreBox.replaceChildren(...more);
      return;
    }
    taskView.replaceChildren(
      el("p", {}, el("a", { href: "#/", text: "← board" })),
      el("h1", { text: r.agent.name + " · " + r.taskId }),
      el("div", { id: "task-info" }, ...info),
      actions(r, got.mayAct),
      section("Diff", r.diff ? el("pre", { class: "stat", text: r.diff.stat }) : el("p", { text: "no diff" }), diffBox),
      cm.el,
      el("div", { id: "task-more" }, ...more),
    );
    if (r.diff) {
      try {
        const p = await api("/api/task/" + encodeURIComponent(r.taskId) + "/patch");
        if (p.patch) {
          const drawDiff = (outputFormat) => {
            const ui = new Diff2HtmlUI(diffBox, p.patch, {
              drawFileList: true,
              matching: "lines",
              outputFormat,
              highlight: true,
            });
            ui.draw();
            ui.highlightCode();
          };
          const format = el(
            "select",
            { id: "diff-format", onchange: () => drawDiff(format.value) },
            el("option", { value: "line-by-line", text: "unified" }),
            el("option", { value: "side-by-side", text: "side by side" }),
          );
          diffBox.before(format);
          drawDiff("line-by-line");
          attachLineComments(diffBox, cm.redraw);
        }
        if (p.truncated) diffBox.append(el("p", { class: "warn", text: "the patch is larger than shown" }));
      } catch (e) {
        diffBox.append(el("p", { class: "bad", text: e.code + ": " + e.message }));
      }
    }
  }

  function route() {
    const m = /^#\/task\/(.+)$/.exec(location.hash);
    if (m) return showTask(decodeURIComponent(m[1]), false);
    openTask = null;
    taskView.hidden = true;
    boardView.hidden = false;
    queueDraw();
  }

  window.addEventListener("hashchange", route);
  setInterval(queueDraw, 30000); // the ages on the cards; the data itself comes by events
  let connectedBefore = false;
  connect();
  // The listing at once, alongside the event stream's start (a card event meanwhile is kept over it).
  loadBoard().catch(() => undefined);
  route();
})();
