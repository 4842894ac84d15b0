// Checks a LaunchSpec before any runtime starts anything, so bad input fails with a clear LAUNCH_FAILED and
// leaves no half-made pane or process behind. Shared by every runtime.
import { stat } from "node:fs/promises";
import { DshError } from "../core/errors.js";
import type { LaunchSpec } from "./types.js";

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export async function checkLaunchSpec(spec: LaunchSpec): Promise<void> {
  if (!Array.isArray(spec.argv) || spec.argv.length === 0 || typeof spec.argv[0] !== "string" || spec.argv[0] === "") {
    throw new DshError(
      "LAUNCH_FAILED",
      'argv is empty: pass the program to run as argv[0] (e.g. ["pi", "--mode", "rpc"])',
    );
  }
  spec.argv.forEach((arg, i) => {
    if (typeof arg !== "string")
      throw new DshError("LAUNCH_FAILED", `argv[${i}] is not a string: pass every argument as a string`);
    if (arg.includes("\0"))
      throw new DshError("LAUNCH_FAILED", `argv[${i}] contains a NUL byte, which no program can receive: remove it`);
  });
  if (typeof spec.name !== "string" || spec.name.trim() === "") {
    throw new DshError("LAUNCH_FAILED", "the agent name is empty: pass a name such as worker-flash-a1b2");
  }
  for (const [key, value] of Object.entries(spec.env ?? {})) {
    if (!ENV_NAME.test(key)) {
      throw new DshError(
        "LAUNCH_FAILED",
        `environment variable name ${JSON.stringify(key)} is invalid: use letters, digits and _ (not starting with a digit)`,
      );
    }
    if (typeof value !== "string")
      throw new DshError("LAUNCH_FAILED", `environment variable ${key} is not a string: pass its value as a string`);
    if (value.includes("\0"))
      throw new DshError("LAUNCH_FAILED", `environment variable ${key} contains a NUL byte: remove it`);
  }
  if (typeof spec.cwd !== "string" || spec.cwd === "") {
    throw new DshError("LAUNCH_FAILED", "cwd is empty: pass the directory the child should work in");
  }
  const st = await stat(spec.cwd).catch(() => null);
  if (st === null)
    throw new DshError("LAUNCH_FAILED", `cwd ${spec.cwd} does not exist: create it or pass an existing directory`);
  if (!st.isDirectory()) throw new DshError("LAUNCH_FAILED", `cwd ${spec.cwd} is not a directory: pass a directory`);
}
