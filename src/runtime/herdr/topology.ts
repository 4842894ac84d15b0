// Where a task's pane comes from, as the original plugin laid it out: a tab `herdr: <agent>` in the
// workspace `DSH · {repo}` (reused when it exists), or a split of the owner's pane when the owner runs in Herdr.
import { basename } from "node:path";
import { DshError } from "../../core/errors.js";
import type { LaunchSpec } from "../types.js";
import type { HerdrClient } from "./client.js";

export interface PanePlace {
  paneId: string;
  tabId: string;
  workspaceId: string;
}

export function workspaceLabel(spec: Pick<LaunchSpec, "repoName" | "cwd">): string {
  return `DSH · ${spec.repoName ?? basename(spec.cwd)}`;
}

export async function openPane(client: HerdrClient, spec: LaunchSpec, env: Record<string, string>): Promise<PanePlace> {
  if (spec.ownerPaneId !== undefined) {
    const r = await client.call("pane.split", {
      target_pane_id: spec.ownerPaneId,
      direction: "right",
      cwd: spec.cwd,
      env,
      focus: false,
    });
    return place(r.pane, "pane.split");
  }
  const label = workspaceLabel(spec);
  const list = await client.call("workspace.list", {});
  const workspaces = Array.isArray(list.workspaces)
    ? (list.workspaces as Array<{ workspace_id?: unknown; label?: unknown }>)
    : [];
  let workspaceId = workspaces.find((w) => w.label === label)?.workspace_id;
  if (typeof workspaceId !== "string") {
    const created = await client.call("workspace.create", { cwd: spec.cwd, label, focus: false });
    workspaceId = (created.workspace as { workspace_id?: unknown } | undefined)?.workspace_id;
    if (typeof workspaceId !== "string")
      throw new DshError("HERDR_PROTOCOL", "Herdr's workspace_created carried no workspace_id");
  }
  const tab = await client.call("tab.create", {
    workspace_id: workspaceId,
    cwd: spec.cwd,
    label: `herdr: ${spec.name}`,
    env,
    focus: false,
  });
  return place(tab.root_pane, "tab.create");
}

function place(pane: unknown, method: string): PanePlace {
  const p = pane as { pane_id?: unknown; tab_id?: unknown; workspace_id?: unknown } | undefined;
  if (typeof p?.pane_id !== "string" || typeof p.tab_id !== "string" || typeof p.workspace_id !== "string") {
    throw new DshError("HERDR_PROTOCOL", `Herdr's answer to ${method} carried no pane (pane_id, tab_id, workspace_id)`);
  }
  return { paneId: p.pane_id, tabId: p.tab_id, workspaceId: p.workspace_id };
}
