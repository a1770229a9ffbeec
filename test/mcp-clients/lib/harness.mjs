// The harness of the MCP client tests: a kioku built from the tree
// (KIOKU_BIN names one instead; otherwise `go build ./cmd/kioku` into
// .test/), served on a free loopback port behind API keys that `kioku key`
// makes: an app key of demo and user keys of its users ann and bob.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const repoRoot = path.resolve(here, "../../..");

let built;
/** The kioku binary: $KIOKU_BIN, or one built from the tree once. */
export function kiokuBin() {
  if (process.env.KIOKU_BIN) {
    return process.env.KIOKU_BIN;
  }
  if (!built) {
    built = path.join(here, "..", ".test", "kioku");
    execFileSync("go", ["build", "-o", built, "./cmd/kioku"], { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"] });
  }
  return built;
}

/** Makes an API key of app (of one of its users when user is given): its secret and key file entry. */
function makeKey(app, user) {
  const args = ["key", "--app", app, "--name", `mcp-test-${app}-${user ?? "app"}`];
  if (user) {
    args.push("--user", user);
  }
  const out = execFileSync(kiokuBin(), args, { encoding: "utf8" });
  const key = /kioku_[A-Za-z0-9_-]+/.exec(out)?.[0];
  const entry = /\{"name".*\}/.exec(out)?.[0];
  if (!key || !entry) {
    throw new Error(`kioku key printed no key and entry:\n${out}`);
  }
  return { key, entry: JSON.parse(entry) };
}

/**
 * Starts `kioku serve` behind the keys of app demo and resolves once it
 * listens: its URL, the keys (app, ann, bob: secrets), and stop().
 */
export async function startKioku() {
  const dir = mkdtempSync(path.join(tmpdir(), "kioku-mcp-"));
  const app = makeKey("demo");
  const ann = makeKey("demo", "ann");
  const bob = makeKey("demo", "bob");
  const keyFile = path.join(dir, "keys.json");
  writeFileSync(keyFile, JSON.stringify({ keys: [app.entry, ann.entry, bob.entry] }));
  const child = spawn(kiokuBin(), ["serve", "--addr", "127.0.0.1:0", "--data-dir", path.join(dir, "data"), "--log-level", "warn", "--auth-keys", keyFile], {
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
    keys: { app: app.key, ann: ann.key, bob: bob.key },
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
 * Waits for a kioku operation (save_to_memory's) to be done, with
 * kioku.v1's WaitOperation over Connect's JSON, and returns it.
 */
export async function waitOperation(url, key, name) {
  const res = await fetch(`${url}/kioku.v1.OperationService/WaitOperation`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: JSON.stringify({ name, timeout: "30s" }),
  });
  const op = await res.json();
  if (!res.ok || !op.done) {
    throw new Error(`WaitOperation ${name}: ${res.status} ${JSON.stringify(op)}`);
  }
  return op;
}

/** The tools every client must list. */
export const toolNames = ["core_memory_append", "core_memory_replace", "load_memory", "memory", "retrieve_profiles", "save_to_memory", "search_conversation"];
