// Whether this machine lets a test's daemon make cgroup v2 scopes (src/checks/scope.ts); else why not, for a skip.
import { mkdirSync, readFileSync, rmdirSync } from "node:fs";
import { join } from "node:path";

/** Undefined when a cgroup v2 hierarchy lets this process make a cgroup (root, or a delegated one), else why not. */
export function noScope(): string | undefined {
  try {
    const mount = readFileSync("/proc/self/mountinfo", "utf8")
      .split("\n")
      .map((l) => l.split(" "))
      .find((f) => f[f.indexOf("-") + 1] === "cgroup2")?.[4];
    if (mount === undefined) return "no cgroup v2 hierarchy is mounted";
    const own = readFileSync("/proc/self/cgroup", "utf8")
      .split("\n")
      .find((l) => l.startsWith("0::"))
      ?.slice(3);
    if (own === undefined) return "this process is in no cgroup v2";
    const probe = join(mount, own, `dsh-probe-${process.pid}`);
    try {
      mkdirSync(probe);
      rmdirSync(probe);
    } catch (e) {
      return `its cgroup ${join(mount, own)} is not writable here (${(e as Error).message})`;
    }
    return undefined;
  } catch (e) {
    return `cannot read the cgroups (${(e as Error).message})`;
  }
}
