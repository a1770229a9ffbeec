// Starts a real kioku for the tests: the binary `npm test` builds into
// .test/kioku (or $KIOKU_BIN), on a free loopback port, with its data in a
// fresh directory.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const kiokuBin = process.env.KIOKU_BIN ?? new URL("../.test/kioku", import.meta.url).pathname;

/**
 * Runs `kioku serve` with extra flags and resolves once it listens, with
 * its URL and stop(). The server's log is kept and printed if it fails to
 * start.
 */
export async function startKioku(...flags) {
  const dir = mkdtempSync(join(tmpdir(), "kioku-ts-"));
  const child = spawn(kiokuBin, ["serve", "--addr", "127.0.0.1:0", "--data-dir", join(dir, "data"), "--log-level", "warn", ...flags], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kioku did not start in 20s:\n${log}`)), 20_000);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk) => {
      log += chunk;
      const m = /kioku listening on (http:\/\/\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`kioku exited (${code}) before listening:\n${log}`));
    });
  });
  return {
    url,
    dir,
    log: () => log,
    async stop() {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Makes an API key with `kioku key` for app, or for one user of it, and
 * returns the key and its entry for a key file.
 */
export function makeKey(app, user) {
  const args = ["key", "--app", app, "--name", `ts-test-${app}-${user ?? "app"}`];
  if (user) {
    args.push("--user", user);
  }
  const out = execFileSync(kiokuBin, args, { encoding: "utf8" });
  const key = /kioku_[A-Za-z0-9_-]+/.exec(out)?.[0];
  const entry = /\{"name".*\}/.exec(out)?.[0];
  if (!key || !entry) {
    throw new Error(`kioku key printed no key and entry:\n${out}`);
  }
  return { key, entry: JSON.parse(entry) };
}

/** Writes a key file (--auth-keys) holding the entries; returns its path. */
export function keyFile(...entries) {
  const dir = mkdtempSync(join(tmpdir(), "kioku-ts-keys-"));
  const file = join(dir, "keys.json");
  writeFileSync(file, JSON.stringify({ keys: entries }));
  return file;
}
