#!/usr/bin/env node
// npm's prepare: builds dist/ at `npm ci` / `npm install` in a checkout, and when pi installs this package from a git
// URL (`pi install git:…` clones it and runs `npm install --omit=dev`). A development install has the type
// definitions (devDependencies) and runs the full `tsc -p tsconfig.json`; an install without them (--omit=dev)
// builds only src/ with tsconfig.install.json, which emits without type checking (the types live in
// devDependencies; the code is the same). typescript itself is a dependency so that both can build.
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

const root = join(import.meta.dirname, "..");
let tsc;
try {
  tsc = createRequire(join(root, "package.json")).resolve("typescript/bin/tsc");
} catch {
  console.error(
    `dsh-herdr: cannot build: typescript is not installed in ${root}, so dist/ cannot be built; ` +
      "run `npm install` there (typescript is one of its dependencies), then `npm run build`",
  );
  process.exit(1);
}
const dev = existsSync(join(root, "node_modules", "@types", "node"));
const config = dev ? "tsconfig.json" : "tsconfig.install.json";
if (!dev) console.error(`dsh-herdr: building dist/src without dev dependencies (${config})`);
const r = spawnSync(process.execPath, [tsc, "-p", config], { cwd: root, stdio: "inherit" });
if (r.status !== 0)
  console.error(`dsh-herdr: build failed: tsc -p ${config} exited ${r.status ?? r.signal}; dist/ is incomplete`);
process.exit(r.status ?? 1);
