// usage: what the tasks of this home cost, per day and owner, per owner and in total, from the task dirs (the task
// index and result.json files, as `list` reads them without a daemon). A task counts on the local day it was spawned.
import type { Command } from "commander";
import { formatUsd, usageReport, type UsageReport, type UsageTotals } from "../../core/budget.js";
import { localDay } from "../../store/usage-day.js";
import type { CliContext } from "../common/context.js";
import { columns } from "../format/text.js";
import { safeLine } from "../format/safe.js";
import { printJson } from "../common/io.js";
import { offlineRows } from "../common/task-files.js";
import { examples, jsonOption, usage } from "../common/options.js";

export function registerUsageCommand(program: Command, ctx: CliContext): void {
  const cmd = program
    .command("usage")
    .description(
      "spend of this home's tasks: cost (USD, as pi priced it) and tokens per day and owner, per owner, total",
    )
    .option("--owner <id>", "only tasks of this owner")
    .option("--days <n>", "only the last N local days (today is 1)");
  jsonOption(cmd);
  examples(cmd, ["dsh-herdr usage", "dsh-herdr usage --days 7", "dsh-herdr usage --json | jq .total.cost"]);
  cmd.action((o: { owner?: string; days?: string; json?: boolean }) => {
    let since: string | undefined;
    if (o.days !== undefined) {
      const n = Number(o.days);
      if (!Number.isInteger(n) || n < 1) throw usage(`--days ${o.days}: give a whole number of days, 1 or more`);
      const d = new Date();
      since = localDay(new Date(d.getFullYear(), d.getMonth(), d.getDate() - (n - 1)).getTime());
    }
    const rows = offlineRows(ctx.home)
      .filter((r) => o.owner === undefined || r.owner === o.owner)
      .filter((r) => since === undefined || localDay(r.timing.createdAt) >= since)
      .map((r) => ({
        taskId: r.taskId,
        owner: r.owner ?? "-",
        createdAt: r.timing.createdAt,
        ...(r.usage ? { usage: r.usage } : {}),
      }));
    const report = usageReport(rows, localDay);
    if (o.json) return printJson(ctx.io, report);
    ctx.io.out(render(report));
  });
}

const tokens = (t: UsageTotals) => String(t.inputTokens + t.cacheReadTokens + t.cacheWriteTokens);

function render(r: UsageReport): string {
  if (r.total.tasks === 0) return "no tasks\n";
  const lines = columns([
    ["DAY", "OWNER", "TASKS", "COST", "INPUT", "OUTPUT"],
    ...r.days.map((d) => [
      d.day,
      safeLine(d.owner),
      String(d.tasks),
      formatUsd(d.cost),
      tokens(d),
      String(d.outputTokens),
    ]),
  ]);
  const t = r.total;
  lines.push(
    "",
    `total: ${t.tasks} task(s) · ${formatUsd(t.cost)} · ${tokens(t)} input tokens (${t.cacheReadTokens} from the cache) · ${t.outputTokens} output tokens`,
  );
  if (r.owners.length > 1)
    for (const o of r.owners) lines.push(`  ${safeLine(o.owner)}: ${o.tasks} task(s) · ${formatUsd(o.cost)}`);
  if (t.unpriced > 0)
    lines.push(`(${t.unpriced} task(s) recorded before costs were kept, or never started: counted as 0 $)`);
  return lines.join("\n") + "\n";
}
