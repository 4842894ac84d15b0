// Test helper: a filter on a machine link, run over ssh as the machine's command in front of the real one:
//   node link-filter.js --drop <method>=<file> [--drop ...] -- <real command...> daemon connect
// It starts the real command (`dsh-herdr daemon connect`) and copies frames both ways. While <file> exists, the
// first reply to a request of <method> is not passed on: the file is removed (so it happens once per arming) and
// the filter exits, ending the ssh session. The request ran on the machine; its reply is lost on the link.
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";

const args = process.argv.slice(2);
const sep = args.indexOf("--");
const real = args.slice(sep + 1);
/** Method → the file that arms dropping its next reply. */
const drops = new Map<string, string>();
for (let i = 0; i < sep; i++) {
  if (args[i] !== "--drop") continue;
  const [method, file] = (args[i + 1] ?? "").split("=");
  if (method && file) drops.set(method, file);
}
if (sep < 0 || real.length === 0) {
  process.stderr.write("usage: link-filter --drop METHOD=FILE ... -- COMMAND...\n");
  process.exit(2);
}

const child = spawn(real[0]!, real.slice(1), { stdio: ["pipe", "pipe", "inherit"] });
child.on("exit", (code) => process.exit(code ?? 0));

/** Request id → method, from the frames going in. */
const methods = new Map<number, string>();
let inBuf = "";
process.stdin.on("data", (c: Buffer) => {
  inBuf += c.toString("utf8");
  for (let nl; (nl = inBuf.indexOf("\n")) >= 0; ) {
    const line = inBuf.slice(0, nl);
    inBuf = inBuf.slice(nl + 1);
    try {
      const m = JSON.parse(line) as { id?: number; method?: string };
      if (typeof m.id === "number" && typeof m.method === "string") methods.set(m.id, m.method);
    } catch {
      /* not ours to judge */
    }
  }
  child.stdin!.write(c);
});
process.stdin.on("end", () => child.stdin!.end());

let outBuf = Buffer.alloc(0);
child.stdout!.on("data", (c: Buffer) => {
  outBuf = Buffer.concat([outBuf, c]);
  for (let nl; (nl = outBuf.indexOf(10)) >= 0; ) {
    const frame = outBuf.subarray(0, nl + 1);
    outBuf = outBuf.subarray(nl + 1);
    let id: number | undefined;
    try {
      const m = JSON.parse(frame.toString("utf8")) as { id?: number };
      id = typeof m.id === "number" ? m.id : undefined;
    } catch {
      id = undefined;
    }
    const armed = id !== undefined ? drops.get(methods.get(id) ?? "") : undefined;
    if (armed !== undefined) {
      let disarmed = false;
      try {
        rmSync(armed);
        disarmed = true;
      } catch {
        disarmed = false; // not armed
      }
      if (disarmed) {
        // The reply is lost: the link goes down without it.
        child.kill("SIGTERM");
        process.exit(0);
      }
    }
    process.stdout.write(frame);
  }
});
