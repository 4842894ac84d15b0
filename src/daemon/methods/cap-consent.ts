// A spend cap is lifted by a person, not by the model it limits: an owner pi's respond that would raise one (a task
// paused at a cap, or a respond giving a cap) is refused unless config.json owner.mayRaiseCaps allows it. The CLI is
// a person and may.
import { givenCaps, type CapLimits } from "../../core/budget.js";
import { capRaiseCommand } from "../../core/crew/crew-delivery.js";
import { DshError } from "../../core/errors.js";
import type { Config } from "../../store/config.js";
import type { Live } from "../task/live.js";
import type { Connection } from "../server/server.js";

export function assertMayRaiseCaps(
  config: Pick<Config, "owner">,
  conn: Pick<Connection, "kind">,
  live: Pick<Live, "result"> & { rec: Pick<Live["rec"], "taskId"> },
  given: CapLimits,
): void {
  if (conn.kind !== "owner" || config.owner?.mayRaiseCaps === true) return;
  const paused = live.result?.status === "blocked" ? live.result.cap : undefined;
  const giving = Object.keys(givenCaps(given)).length > 0;
  if (!paused && !giving) return;
  const taskId = live.rec.taskId;
  const command = paused ? capRaiseCommand(taskId, paused) : `dsh-herdr respond ${taskId} --max-turns N "go on"`;
  throw new DshError(
    "CAP_NEEDS_PERSON",
    `${paused ? `subagent ${taskId} is paused at its spend cap` : "a respond may not set a spend cap"}: a cap is raised by a person, not by the model it limits. Ask the user to raise it: they run \`${command}\` (or close the subagent).`,
    paused ? { cap: paused.cap, limit: paused.limit, spent: paused.spent } : undefined,
  );
}
