// notify test: a sample notification to every webhook and command in config.json `notify`, sent from this process
// (no daemon needed), with each target's answer: the HTTP status and the start of the body, or the command's exit
// code and the end of its output. Exit 1 when a target failed or none is configured.
import type { Command } from "commander";
import { randomBytes } from "node:crypto";
import type { NotifyBody } from "../../core/notify.js";
import { describeAnswer, postWebhook, runCommand, webhookLabel, type Answer } from "../../notify/send.js";
import { loadConfig } from "../../store/config.js";
import type { CliContext } from "../common/context.js";
import { EXIT } from "../common/exit-codes.js";
import { safeLine } from "../format/safe.js";
import { printJson } from "../common/io.js";
import { packageVersion } from "../common/version.js";
import { examples, jsonOption } from "../common/options.js";

/** What a sample carries: the real body's shape, a task id that no task has. */
export function sampleBody(now: number): NotifyBody {
  return {
    deliveryId: `test-${randomBytes(6).toString("hex")}`,
    taskId: "t0000000test",
    agent: "worker-test-test",
    status: "completed",
    summary: "dsh-herdr notify test: a sample notification",
    nextAction: "none",
    owner: "cli",
    at: new Date(now).toISOString(),
  };
}

export function registerNotifyCommands(program: Command, ctx: CliContext): void {
  const notify = program
    .command("notify")
    .description("webhooks and commands told of settled tasks (config.json notify)");
  const test = notify
    .command("test")
    .description("send a sample notification to each configured webhook and command, and print each answer");
  jsonOption(test);
  examples(test, [
    `dsh-herdr config set notify '{"webhooks":[{"url":"https://example.com/hook","secret":"..."}]}'`,
    "dsh-herdr notify test",
  ]);
  test.action(async (o: { json?: boolean }) => {
    const c = (await loadConfig(ctx.home)).notify ?? {};
    const body = sampleBody(Date.now());
    const ua = `dsh-herdr/${packageVersion()}`;
    const sent = await Promise.all([
      ...(c.webhooks ?? []).map(async (t) => ({
        kind: "webhook" as const,
        target: webhookLabel(t.url),
        ...(await postWebhook(t, body, ua)),
      })),
      ...(c.commands ?? []).map(async (t) => ({
        kind: "command" as const,
        target: typeof t.command === "string" ? t.command : t.command.join(" "),
        ...(await runCommand(t, body)),
      })),
    ]);
    if (sent.some((s) => !s.ok) || sent.length === 0) ctx.exitCode = EXIT.failed;
    if (o.json) return printJson(ctx.io, { deliveryId: body.deliveryId, targets: sent });
    if (sent.length === 0) {
      ctx.io.err(
        `no notify targets in config.json; add one, e.g. dsh-herdr config set notify '{"webhooks":[{"url":"https://example.com/hook"}]}'\n`,
      );
      return;
    }
    for (const s of sent) ctx.io.out(`${s.ok ? "ok  " : "FAIL"}  ${s.kind} ${safeLine(s.target)}: ${line(s)}\n`);
  });
}

function line(a: Answer): string {
  const text = a.text?.trim() ? `: ${safeLine(a.text.trim().replace(/\s+/g, " ").slice(0, 200))}` : "";
  return `${describeAnswer(a)}${text}`;
}
