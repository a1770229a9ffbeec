// The harness of the client tests: a kioku built from the tree, a fake
// Gemini API for memory generation and a fake GCE metadata server for
// Google's auth libraries, all on loopback; and a guard that refuses, and
// records, every connection or DNS lookup of this process that leaves
// loopback (import this module first, so the guard is in place before any
// client loads).
//
// KIOKU_BIN names a kioku binary; without it the harness builds one from
// the tree (go build ./cmd/kioku) into .test/.

import { spawn, execFileSync } from "node:child_process";
import dns from "node:dns";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../../..");

// --- The loopback guard.

/** Hosts this process tried to reach beyond loopback (each refused). */
export const escapes = [];

function isLoopback(host) {
  if (host === undefined || host === null || host === "") return true; // net's default: localhost
  host = String(host).replace(/^\[|\]$/g, "");
  return host === "localhost" || host === "::1" || host.startsWith("127.") || host === "::ffff:127.0.0.1";
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  let a = args;
  if (Array.isArray(a[0])) a = a[0]; // net.connect's normalized arguments
  const opts = typeof a[0] === "object" && a[0] !== null ? a[0] : { port: a[0], host: typeof a[1] === "string" ? a[1] : undefined };
  if (!opts.path && !isLoopback(opts.host)) {
    const where = `${opts.host}:${opts.port}`;
    escapes.push(where);
    process.nextTick(() => this.destroy(new Error(`the client tests allow loopback only: a connection to ${where} was refused`)));
    return this;
  }
  return connect.apply(this, args);
};

const lookup = dns.lookup;
dns.lookup = function (hostname, ...rest) {
  if (!isLoopback(hostname)) {
    escapes.push(`dns:${hostname}`);
    const cb = rest[rest.length - 1];
    process.nextTick(() => cb(Object.assign(new Error(`the client tests allow loopback only: a lookup of ${hostname} was refused`), { code: "ENOTFOUND" })));
    return {};
  }
  return lookup.call(this, hostname, ...rest);
};
const plookup = dns.promises.lookup;
dns.promises.lookup = async function (hostname, ...rest) {
  if (!isLoopback(hostname)) {
    escapes.push(`dns:${hostname}`);
    throw Object.assign(new Error(`the client tests allow loopback only: a lookup of ${hostname} was refused`), { code: "ENOTFOUND" });
  }
  return plookup.call(this, hostname, ...rest);
};

// Google's auth libraries read Application Default Credentials: none from
// files (an empty home and gcloud configuration), no project from the
// environment, and the GCE metadata server only at the fake one
// (startMetadata), assumed present.
const userEnv = { ...process.env }; // for go build: the user's module cache
const home = mkdtempSync(path.join(os.tmpdir(), "kioku-clients-home-"));
process.env.HOME = home;
process.env.CLOUDSDK_CONFIG = path.join(home, "gcloud");
for (const name of ["GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GOOGLE_CLOUD_QUOTA_PROJECT", "GOOGLE_CLOUD_UNIVERSE_DOMAIN"]) {
  delete process.env[name];
}
process.env.METADATA_SERVER_DETECTION = "assume-present";
process.env.GCE_METADATA_HOST = "127.0.0.1:9"; // until startMetadata
process.on("exit", () => rmSync(home, { recursive: true, force: true }));

// --- Small HTTP servers on loopback.

function serve(handler) {
  return new Promise((resolve) => {
    const srv = http.createServer(handler);
    srv.listen(0, "127.0.0.1", () => resolve({ srv, url: `http://127.0.0.1:${srv.address().port}`, port: srv.address().port }));
  });
}

function readJSON(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString() || "{}"));
      } catch (err) {
        reject(err);
      }
    });
  });
}

function texts(content) {
  return (content?.parts ?? []).map((p) => p.text ?? "").join("\n");
}

/**
 * A fake Gemini API for kioku's memory generation: the extraction call
 * turns each user line of the conversation into the fact "The user said:
 * ...", and the consolidation call updates the existing memory that says
 * exactly the new fact (so that a generation's metadata meets a memory's)
 * and creates every other new fact. Calls are counted in calls.
 */
export async function startGemini() {
  const calls = { extract: 0, consolidate: 0 };
  const s = await serve(async (req, res) => {
    const body = await readJSON(req);
    const system = texts(body.systemInstruction);
    const user = (body.contents ?? []).map(texts).join("\n");
    let reply;
    if (/New\s+facts\s+have\s+been\s+learned/.test(system)) {
      calls.consolidate++;
      const facts = [...user.matchAll(/^\((\d+)\) (.*)$/gm)];
      const shown = new Map([...user.matchAll(/^\[(\d+)\] (.*)$/gm)].map((m) => [m[2], Number(m[1])]));
      reply = {
        actions: facts.map((m) =>
          shown.has(m[2])
            ? { candidate: Number(m[1]), action: "UPDATE", memory: shown.get(m[2]), fact: m[2] }
            : { candidate: Number(m[1]), action: "CREATE", memory: 0, fact: m[2] },
        ),
      };
    } else {
      calls.extract++;
      const topic = system.match(/^- ([A-Z_a-z0-9-]+):/m)?.[1] ?? "USER_PERSONAL_INFO";
      const lines = [...user.matchAll(/^\[(\d+)\] user: (.*?)(?: \(\d{4}-\d\d-\d\d \d\d:\d\d\))?$/gm)];
      reply = { facts: lines.map((m) => ({ fact: `The user said: ${m[2]}`, topic, events: [Number(m[1])] })) };
    }
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify({
      candidates: [{ content: { role: "model", parts: [{ text: JSON.stringify(reply) }] }, finishReason: "STOP", index: 0 }],
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
    }));
  });
  return { ...s, calls, close: () => s.srv.close() };
}

/**
 * A fake GCE metadata server: the project id, and an access token (token,
 * such as a kioku API key for a kioku that requires keys) for the default
 * service account. Google's auth libraries find it through
 * GCE_METADATA_HOST, which this sets. The access tokens it hands out are
 * counted in tokens.
 */
export async function startMetadata({ project = "my-project", token = "kioku-local-token" } = {}) {
  const state = { tokens: 0, token };
  const s = await serve((req, res) => {
    res.setHeader("Metadata-Flavor", "Google");
    const p = new URL(req.url, "http://x").pathname;
    if (req.headers["metadata-flavor"] !== "Google") {
      res.statusCode = 403;
      return res.end("missing Metadata-Flavor");
    }
    if (p === "/computeMetadata/v1/instance/service-accounts/default/token") {
      state.tokens++;
      res.setHeader("Content-Type", "application/json");
      return res.end(JSON.stringify({ access_token: state.token, expires_in: 3600, token_type: "Bearer" }));
    }
    const values = {
      "/computeMetadata/v1/project/project-id": project,
      "/computeMetadata/v1/project/numeric-project-id": "123456789",
      "/computeMetadata/v1/instance/service-accounts/default/email": "kioku@example.com",
      "/computeMetadata/v1/universe/universe-domain": "googleapis.com",
      "/computeMetadata/v1/universe/universe_domain": "googleapis.com",
      "/computeMetadata/v1/": "",
      "/computeMetadata/v1": "",
      "/": "",
    };
    if (p in values) return res.end(values[p]);
    res.statusCode = 404;
    res.end("not found");
  });
  process.env.GCE_METADATA_HOST = `127.0.0.1:${s.port}`;
  return { ...s, state, close: () => s.srv.close() };
}

/**
 * Starts kioku's own stand-in metadata server (kioku metadata-server) on
 * loopback, handing out token, and points Google's auth libraries at it
 * (GCE_METADATA_HOST), as the docs tell users to. Returns its address and
 * stop().
 */
export async function startKiokuMetadata({ project = "my-project", token }) {
  const proc = spawn(kiokuBinary(), ["metadata-server", "--addr", "127.0.0.1:0", "--project", project], {
    env: { ...process.env, KIOKU_TOKEN: token },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const host = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kioku metadata-server did not start:\n${out}`)), 30000);
    const read = (d) => {
      out += d;
      const m = out.match(/listening on http:\/\/(127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on("data", read);
    proc.stderr.on("data", read);
    proc.on("exit", (code) => reject(new Error(`kioku metadata-server exited with ${code}:\n${out}`)));
  });
  process.env.GCE_METADATA_HOST = host;
  return {
    host,
    stop: () =>
      new Promise((resolve) => {
        proc.once("exit", resolve);
        proc.kill("SIGTERM");
      }),
  };
}

// --- kioku.

let built;

/** The kioku binary: KIOKU_BIN, or one built from the tree. */
export function kiokuBinary() {
  if (process.env.KIOKU_BIN) return process.env.KIOKU_BIN;
  if (!built) {
    const dir = path.join(here, "..", ".test");
    mkdirSync(dir, { recursive: true });
    built = path.join(dir, "kioku");
    execFileSync("go", ["build", "-o", built, "./cmd/kioku"], { cwd: repoRoot, stdio: "inherit", env: userEnv });
  }
  return built;
}

/**
 * Starts a kioku on loopback with its own data and, when gemini is given,
 * memory generation by the fake; with keys (entries of a key file) it
 * requires API keys. Returns its URL, host and port, and stop().
 */
export async function startKioku({ gemini, keys } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "kioku-clients-"));
  const args = ["serve", "--addr", "127.0.0.1:0", "--data-dir", path.join(dir, "data"), "--log-level", "warn"];
  const env = { ...process.env };
  if (gemini) {
    args.push("--model-provider", "gemini", "--gemini-base-url", gemini.url);
    env.GEMINI_API_KEY = "fake";
  }
  if (keys) {
    const file = path.join(dir, "keys.json");
    writeFileSync(file, JSON.stringify({ keys }));
    args.push("--auth-keys", file);
  }
  const proc = spawn(kiokuBinary(), args, { env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kioku did not start:\n${log}`)), 30000);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = log.match(/kioku listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on("exit", (code) => reject(new Error(`kioku exited with ${code}:\n${log}`)));
  });
  const port = Number(new URL(url).port);
  return {
    url,
    host: "127.0.0.1",
    port,
    log: () => log,
    stop: () =>
      new Promise((resolve) => {
        proc.once("exit", () => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
        proc.kill("SIGTERM");
      }),
  };
}

/** Makes an API key of kioku's key file: [secret, entry]. */
export function newKey(name, app, user = "") {
  const out = execFileSync(kiokuBinary(), ["key", "--name", name, "--app", app, ...(user ? ["--user", user] : [])]).toString();
  const secret = out.match(/^\s*(kioku_\S+)$/m)[1];
  const entry = JSON.parse(out.match(/^\s*(\{"name".*\})\s*$/m)[1]);
  return [secret, entry];
}

// --- Values of the tests.

export const project = "my-project";
export const location = "us-central1";
export const engineId = "1491331942182813696";
export const engine = `projects/${project}/locations/${location}/reasoningEngines/${engineId}`;

/** The JSON value as a google.protobuf.Value (protobuf.js's object form). */
export function value(v) {
  if (v === null) return { nullValue: "NULL_VALUE" };
  if (typeof v === "number") return { numberValue: v };
  if (typeof v === "string") return { stringValue: v };
  if (typeof v === "boolean") return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(value) } };
  return { structValue: struct(v) };
}

/** The JSON object as a google.protobuf.Struct (protobuf.js's object form). */
export function struct(o) {
  return { fields: Object.fromEntries(Object.entries(o).map(([k, v]) => [k, value(v)])) };
}

/** The google.protobuf.Struct as JSON. */
export function plain(s) {
  const unvalue = (v) => {
    if ("structValue" in v) return plain(v.structValue);
    if ("listValue" in v) return (v.listValue.values ?? []).map(unvalue);
    if ("nullValue" in v) return null;
    return v.stringValue ?? v.numberValue ?? v.boolValue;
  };
  return Object.fromEntries(Object.entries(s?.fields ?? {}).map(([k, v]) => [k, unvalue(v)]));
}

/** Polls until fn returns a truthy value (at most 20 s). */
export async function eventually(fn, what) {
  const deadline = Date.now() + 20000;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not after 20 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
