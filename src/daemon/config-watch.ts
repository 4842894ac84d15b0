// The running daemon follows config.json: on a change it loads the file again (validated); a good file replaces
// the config the next spawn, the admission and the runtimes read, a bad edit is logged and the old config stays.
import { watch, type FSWatcher } from "node:fs";
import { dirname, basename } from "node:path";
import { configFileDigest, configPath, loadConfig, type Config } from "../store/config.js";
import type { Logger } from "./server/server.js";

export interface ConfigWatch {
  /** sha256 of the config.json text the current config came from. */
  digest(): string;
  /** Load now (also what a change event does); resolves when done. */
  reload(): Promise<void>;
  close(): void;
}

export async function watchConfig(
  home: string,
  opts: {
    initialDigest: string;
    overrides: Partial<Config>;
    apply(c: Config): void;
    log: Logger;
  },
): Promise<ConfigWatch> {
  const file = configPath(home);
  let digest = opts.initialDigest;
  let running: Promise<void> | undefined;
  let again = false;
  const reload = async (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        let d: string;
        try {
          d = await configFileDigest(home);
        } catch (e) {
          // Not a file we read (a FIFO, a device, too large): named once per change, the old config kept.
          opts.log.warn(
            { file, err: (e as Error).message },
            "config.json changed but cannot be read; keeping the previous config",
          );
          continue;
        }
        if (d === digest) continue;
        try {
          const c = await loadConfig(home);
          opts.apply({ ...c, ...opts.overrides });
          digest = d;
          opts.log.info({ file }, "config.json reloaded");
        } catch (e) {
          // Kept: the old config. The digest stays too, so `config set` can tell the edit was not taken.
          opts.log.warn(
            { file, err: (e as Error).message },
            "config.json changed but is invalid; keeping the previous config",
          );
        }
      } while (again);
    })().finally(() => (running = undefined));
    return running;
  };
  let timer: NodeJS.Timeout | undefined;
  let w: FSWatcher | undefined;
  try {
    // The directory, not the file: config set replaces config.json by a rename.
    w = watch(dirname(file), (_ev, name) => {
      if (name !== null && name !== basename(file)) return;
      clearTimeout(timer);
      timer = setTimeout(() => void reload(), 50);
    });
    w.on("error", (e) =>
      opts.log.warn({ err: e.message }, "config.json watch failed; config changes apply at the next restart"),
    );
  } catch (e) {
    opts.log.warn({ err: (e as Error).message }, "cannot watch config.json; config changes apply at the next restart");
  }
  return {
    digest: () => digest,
    reload,
    close() {
      clearTimeout(timer);
      w?.close();
    },
  };
}
