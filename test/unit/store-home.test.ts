// The home directory: created 0700, unsafe homes refused, and a full or read-only disk gives HOME_UNWRITABLE
// without half-written records.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureHome, resolveHome } from "../../src/store/home.js";
import { TaskStore, type TaskRecordBase } from "../../src/store/task-store.js";

interface Rec extends TaskRecordBase {
  payload?: string;
}

test("the home resolves from DSH_HERDR_HOME or ~/.dsh/herdr and is created 0700", async () => {
  const base = mkdtempSync(join(tmpdir(), "dsh-home-"));
  try {
    assert.equal(resolveHome({ HOME: "/h/me" }), "/h/me/.dsh/herdr");
    assert.equal(resolveHome({ HOME: "/h/me", DSH_HERDR_HOME: "~/alt" }), "/h/me/alt");
    const home = join(base, "a", "herdr");
    const paths = await ensureHome(home);
    assert.equal(statSync(home).mode & 0o777, 0o700);
    assert.equal(statSync(paths.tasks).mode & 0o777, 0o700);
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

test("a group/world-writable or foreign-owned home is refused with the chmod/chown fix", async () => {
  const base = mkdtempSync(join(tmpdir(), "dsh-home-"));
  try {
    const home = join(base, "herdr");
    mkdirSync(home);
    chmodSync(home, 0o777);
    await assert.rejects(
      ensureHome(home),
      (e: Error & { code?: string }) => e.code === "HOME_UNSAFE" && e.message.includes(`chmod 700 ${home}`),
    );
    chmodSync(home, 0o700);
    await ensureHome(home);
    if (process.getuid?.() === 0) {
      chownSync(home, 65534, 65534);
      await assert.rejects(
        ensureHome(home),
        (e: Error & { code?: string }) =>
          e.code === "HOME_NOT_YOURS" && /owned by uid 65534/.test(e.message) && /chown/.test(e.message),
      );
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
});

/** A small real filesystem when we may mount one (root); otherwise undefined. */
function tinyFs(dir: string, sizeKb: number): (() => void) | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${sizeKb}k,mode=0700`, "tmpfs", dir], { stdio: "ignore" });
    return () => execFileSync("umount", ["-l", dir], { stdio: "ignore" });
  } catch {
    return undefined;
  }
}

test("a full disk gives HOME_UNWRITABLE and leaves the previous task.json and journal intact", async () => {
  const base = mkdtempSync(join(tmpdir(), "dsh-full-"));
  const mnt = join(base, "mnt");
  mkdirSync(mnt);
  const unmount = tinyFs(mnt, 256);
  try {
    const home = join(mnt, "herdr");
    const store = await TaskStore.open(home);
    const rec = await store.createTask<Rec>((taskId) => ({ taskId, owner: "cli", status: "starting", createdAt: 1 }));
    const before = readFileSync(store.taskPaths(rec.taskId).taskJson, "utf8");
    if (unmount !== undefined) {
      await assert.rejects(
        store.writeTask<Rec>({ ...rec, status: "working", payload: "x".repeat(1024 * 1024) }),
        (e: Error & { code?: string }) =>
          e.code === "HOME_UNWRITABLE" && /disk is full/.test(e.message) && /DSH_HERDR_HOME/.test(e.message),
      );
      assert.equal(readFileSync(store.taskPaths(rec.taskId).taskJson, "utf8"), before, "the old record is whole");
      await assert.rejects(store.writePrompt(rec.taskId, "p".repeat(1024 * 1024)), { code: "HOME_UNWRITABLE" });
    } else {
      // Without mount rights: the journal appends into /dev/full, which fails every write with ENOSPC.
      const events = store.taskPaths(rec.taskId).events;
      unlinkSync(events);
      symlinkSync("/dev/full", events);
    }
    const events = store.taskPaths(rec.taskId).events;
    if (unmount !== undefined) {
      // Fill the rest of the disk so the journal append itself hits ENOSPC.
      try {
        execFileSync("dd", ["if=/dev/zero", `of=${join(mnt, "filler")}`, "bs=4k"], { stdio: "ignore" });
      } catch {
        // dd stops with ENOSPC: the disk is now full
      }
    }
    const journal = unmount !== undefined ? readFileSync(events) : undefined;
    // Larger than the free room in the journal's last page, so the append needs a new block.
    await assert.rejects(store.appendEvent(rec.taskId, { type: "recovered", plan: "n".repeat(64 * 1024) }), {
      code: "HOME_UNWRITABLE",
    });
    if (journal !== undefined) {
      assert.deepEqual(readFileSync(events), journal, "no half-written line is left behind");
      assert.deepEqual(
        (await store.readEvents(rec.taskId)).map((e) => e.type),
        ["created"],
      );
    }
  } finally {
    unmount?.();
    rmSync(base, { recursive: true, force: true });
  }
});

test("a read-only home gives HOME_UNWRITABLE naming the fix", async () => {
  const base = mkdtempSync(join(tmpdir(), "dsh-ro-"));
  const mnt = join(base, "mnt");
  mkdirSync(mnt);
  const unmount = tinyFs(mnt, 1024);
  try {
    const home = join(mnt, "herdr");
    const store = await TaskStore.open(home);
    const rec = await store.createTask<Rec>((taskId) => ({ taskId, owner: "cli", status: "starting", createdAt: 1 }));
    if (unmount !== undefined) execFileSync("mount", ["-o", "remount,ro", mnt], { stdio: "ignore" });
    else chmodSync(store.taskPaths(rec.taskId).dir, 0o500); // not root: permissions are enforced
    await assert.rejects(
      store.writeTask<Rec>({ ...rec, status: "working" }),
      (e: Error & { code?: string }) => e.code === "HOME_UNWRITABLE" && /read-only|permission denied/.test(e.message),
    );
    await assert.rejects(store.allocateTaskId(), { code: "HOME_UNWRITABLE" });
    assert.equal((await store.readTask<Rec>(rec.taskId)).status, "starting");
  } finally {
    unmount?.();
    rmSync(base, { recursive: true, force: true });
  }
});
