// A sibling's warning (src/daemon/task/siblings.ts): two open isolated tasks of one repository whose work conflicts each
// carry one naming the other. The warning a task gets when another task settles is written into its result after its
// own harvest, so the task's journal records it (`siblings{from, warning?}`) and verify applies that record the same
// way (src/core/lifecycle/verify.ts). Pure.

/** Every sibling warning starts so; the one about a given task starts with SIBLING_PREFIX + its id. */
export const SIBLING_PREFIX = "conflicts with sibling task ";

/** `warnings` with the sibling warning about task `from` replaced by `warning` (dropped when undefined). */
export function withSiblingWarning(warnings: readonly string[] | undefined, from: string, warning?: string): string[] {
  return [...(warnings ?? []).filter((w) => !w.startsWith(SIBLING_PREFIX + from)), ...(warning ? [warning] : [])];
}
