// A test-only pi extension standing in for "the installed version of the owner extension": each time pi loads it
// (startup, /reload, a session switch) it imports the owner extension named in $HOME/owner-extension-path and hands
// it pi's API. pi imports an extension's .js modules natively and Node never imports one path twice, so a reload
// reaches new code only through another path: owner-fork-reload points this file at another package copy.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

export default async function versionedOwner(pi: ExtensionAPI): Promise<void> {
  const target = readFileSync(join(process.env.HOME ?? "", "owner-extension-path"), "utf8").trim();
  const mod = (await import(pathToFileURL(target).href)) as { default: (pi: ExtensionAPI) => Promise<void> };
  await mod.default(pi);
}
