// What the person allowed the owner extension in dsh-herdr's config.json, read once when pi loads the extension (a
// change takes a /reload): only `owner.mayLand`, which gives the owner crew_land. The daemon checks it again on every
// task.land, so this decides only whether the tool exists.
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";

/** The home whose config.json the daemon this extension talks to reads. */
export function ownerHome(env: NodeJS.ProcessEnv = process.env): string {
  const home = env.DSH_HERDR_HOME?.trim();
  if (home) return home;
  if (env.DSH_HERDR_SOCKET) return dirname(env.DSH_HERDR_SOCKET);
  return join(env.HOME ?? homedir(), ".dsh", "herdr");
}

/** config.json `owner.mayLand` is true; false when the file is absent, unreadable or says otherwise. */
export function ownerMayLand(env: NodeJS.ProcessEnv = process.env): boolean {
  try {
    const text = readFileSync(join(ownerHome(env), "config.json"), "utf8");
    if (text.length > 1024 * 1024) return false;
    const c = JSON.parse(text) as { owner?: { mayLand?: unknown } };
    return c?.owner?.mayLand === true;
  } catch {
    return false;
  }
}
