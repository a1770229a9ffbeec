// The harness of the identity tests, all on loopback: a standard OpenID
// provider (oidc-provider, in this process: its real discovery document,
// key set and signing), the Firebase Auth emulator (firebase-tools, a
// child process), and a kioku built from the tree started with --identity
// naming both.
//
// KIOKU_BIN names a kioku binary, COMPANION_BIN a companion; without them
// the harness builds them from the tree (go build) into .test/.

import { spawn, execFileSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import Provider from "oidc-provider";

const here = path.dirname(fileURLToPath(import.meta.url));
export const repoRoot = path.resolve(here, "../../..");

/** A free port on loopback. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// --- The OpenID provider.

/** A new RSA signing key as a private JWK with the key id kid. */
export function newSigningKey(kid) {
  const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
  return { ...privateKey.export({ format: "jwk" }), kid, alg: "RS256", use: "sig" };
}

// The clients registered at the provider: kioku is the audience kioku's
// identity file names; other is another application of the same issuer.
const clients = ["kioku", "other"].map((id) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  redirect_uris: ["http://127.0.0.1/callback"],
  grant_types: ["authorization_code"],
  response_types: ["code"],
  id_token_signed_response_alg: "RS256",
}));

function newProvider(issuer, key) {
  const provider = new Provider(issuer, {
    clients,
    jwks: { keys: [key] },
    // No login pages: ID tokens are issued by idToken below.
    features: { devInteractions: { enabled: false } },
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
    ttl: { IdToken: 3600 },
  });
  provider.on("server_error", (_ctx, err) => console.error("oidc-provider:", err));
  return provider;
}

/**
 * Issues an ID token with the provider's own signing (its IdToken model,
 * as its token endpoint does): for the user sub, to the client (the
 * token's audience), expiring at expiresAt (seconds since 1970) when given.
 */
async function issue(provider, sub, { client = "kioku", expiresAt } = {}) {
  const c = await provider.Client.find(client);
  const token = new provider.IdToken({ sub }, { client: c });
  token.scope = "openid";
  return token.issue({ use: "idtoken", expiresAt });
}

/**
 * An oidc-provider of the issuer that serves nothing, signing with key:
 * idToken(sub, options) as startOIDC's.
 */
export function signer(issuer, key = newSigningKey("key-1")) {
  const p = newProvider(issuer, key);
  return { idToken: (sub, opts) => issue(p, sub, opts) };
}

/**
 * Starts oidc-provider on 127.0.0.1 (port: a free one unless given), with
 * the signing key key. Returns its issuer URL; idToken(sub, options) for a
 * token of a user; rotate(key), which restarts it on the same port with
 * another key (the old one no longer published); stop() and start(); and
 * signer(key), a provider of the same issuer that is not serving, to sign
 * with a key the issuer does not publish.
 */
export async function startOIDC({ key = newSigningKey("key-1"), port } = {}) {
  port ??= await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  let provider = newProvider(issuer, key);
  let srv;
  const o = {
    issuer,
    port,
    fetches: 0, // requests of its discovery document and key set
    idToken: (sub, opts) => issue(provider, sub, opts),
    signer: (other) => signer(issuer, other),
    start: () =>
      new Promise((resolve, reject) => {
        const cb = provider.callback();
        srv = http.createServer((req, res) => {
          if (req.url.startsWith("/.well-known/") || req.url.startsWith("/jwks")) o.fetches++;
          cb(req, res);
        });
        srv.once("error", reject);
        srv.listen(port, "127.0.0.1", resolve);
      }),
    stop: () =>
      new Promise((resolve) => {
        if (!srv) return resolve();
        srv.closeAllConnections();
        srv.close(() => resolve());
        srv = undefined;
      }),
    rotate: async (next) => {
      await o.stop();
      provider = newProvider(issuer, next);
      await o.start();
    },
  };
  await o.start();
  return o;
}

// --- The Firebase Auth emulator.

/** The Firebase project of the tests, a demo- project (no real one). */
export const firebaseProject = "demo-kioku";

/**
 * Starts the Firebase Auth emulator of firebase-tools on a free loopback
 * port (a firebase.json of its own names it), offline: a demo- project,
 * no login, no update check, no usage reports. Returns its host
 * (FIREBASE_AUTH_EMULATOR_HOST's form), signUp() for a new anonymous
 * user's {uid, idToken}, and stop().
 */
export async function startAuthEmulator() {
  const port = await freePort();
  const uiPort = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), "kioku-auth-emulator-"));
  writeFileSync(path.join(dir, "firebase.json"), JSON.stringify({
    emulators: { auth: { host: "127.0.0.1", port }, ui: { enabled: false }, hub: { host: "127.0.0.1", port: uiPort }, logging: { host: "127.0.0.1", port: await freePort() } },
  }));
  const bin = path.join(here, "..", "node_modules", ".bin", "firebase");
  const proc = spawn(bin, ["emulators:start", "--only", "auth", "--project", firebaseProject, "--config", path.join(dir, "firebase.json")], {
    cwd: dir,
    // Its own HOME and TMPDIR: no login or settings of the user's, and its
    // hub's locator file (TMPDIR/hub-PROJECT.json) apart from other runs'.
    env: { ...process.env, HOME: dir, TMPDIR: dir, XDG_CONFIG_HOME: path.join(dir, "config"), NO_UPDATE_NOTIFIER: "1", CI: "true" },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true, // a process group of its own, ended whole by stop()
  });
  let log = "";
  await new Promise((resolve, reject) => {
    // About 10 s on an idle machine; far more on a busy one.
    const timer = setTimeout(() => reject(new Error(`the Firebase Auth emulator did not start in 150 s:\n${log}`)), 150000);
    const read = (d) => {
      log += d;
      if (/All emulators ready/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    };
    proc.stdout.on("data", read);
    proc.stderr.on("data", read);
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the Firebase Auth emulator exited with ${code}:\n${log}`));
    });
  });
  const host = `127.0.0.1:${port}`;
  return {
    host,
    log: () => log,
    signUp: async () => {
      const res = await fetch(`http://${host}/identitytoolkit.googleapis.com/v1/accounts:signUp?key=fake-api-key`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ returnSecureToken: true }),
      });
      const body = await res.json();
      if (!res.ok) throw new Error(`the Auth emulator's signUp: ${res.status} ${JSON.stringify(body)}`);
      return { uid: body.localId, idToken: body.idToken };
    },
    stop: () =>
      new Promise((resolve) => {
        proc.removeAllListeners("exit");
        proc.once("exit", () => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
        process.kill(-proc.pid, "SIGTERM");
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
    execFileSync("go", ["build", "-o", built, "./cmd/kioku"], { cwd: repoRoot, stdio: "inherit" });
  }
  return built;
}

/** The companion demo's binary: COMPANION_BIN, or one built from the tree into .test/. */
export function companionBinary() {
  if (process.env.COMPANION_BIN) return process.env.COMPANION_BIN;
  const bin = path.join(here, "..", ".test", "companion");
  mkdirSync(path.dirname(bin), { recursive: true });
  execFileSync("go", ["build", "-o", bin, "./cmd/companion"], { cwd: repoRoot, stdio: "inherit" });
  return bin;
}

/**
 * Starts the companion demo (its scripted Hana) on 127.0.0.1:port with
 * args. Returns its URL, log() and stop().
 */
export async function startCompanion(port, args) {
  const proc = spawn(companionBinary(), ["--addr", `127.0.0.1:${port}`, "--model-provider", "demo", "--log-level", "warn", ...args], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the companion did not start:\n${log}`)), 60000);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = log.match(/companion on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the companion exited with ${code}:\n${log}`));
    });
  });
  return {
    url,
    log: () => log,
    stop: () =>
      new Promise((resolve) => {
        proc.removeAllListeners("exit");
        proc.once("exit", resolve);
        proc.kill("SIGTERM");
      }),
  };
}

/** Writes a new token signing key file (kioku token --new-key) into a new directory: its path. */
export function newSigningKeyFile() {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), "kioku-signing-")), "signing.pem");
  execFileSync(kiokuBinary(), ["token", "--new-key", file], { stdio: "ignore" });
  return file;
}

/** Makes an API key of kioku's key file: { secret, entry }. */
export function newKey(name, app, user = "") {
  const out = execFileSync(kiokuBinary(), ["key", "--name", name, "--app", app, ...(user ? ["--user", user] : [])]).toString();
  const secret = out.match(/^\s*(kioku_\S+)$/m)[1];
  const entry = JSON.parse(out.match(/^\s*(\{"name".*\})\s*$/m)[1]);
  return { secret, entry };
}

/**
 * Starts a kioku on loopback with its own data, requiring credentials:
 * the API keys keys (entries of a key file) and the ID tokens of the
 * identity file's providers. With emulator (a host), FIREBASE_AUTH_EMULATOR_HOST
 * names it. Returns its URL, log() and stop().
 */
export async function startKioku({ providers, keys, emulator, args = [] }) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "kioku-identity-"));
  const identity = path.join(dir, "identity.json");
  writeFileSync(identity, JSON.stringify({ providers }));
  const keyFile = path.join(dir, "keys.json");
  writeFileSync(keyFile, JSON.stringify({ keys }));
  const env = { ...process.env };
  delete env.FIREBASE_AUTH_EMULATOR_HOST;
  if (emulator) env.FIREBASE_AUTH_EMULATOR_HOST = emulator;
  const proc = spawn(kiokuBinary(), ["serve", "--addr", "127.0.0.1:0", "--data-dir", path.join(dir, "data"), "--log-level", "warn", "--auth-keys", keyFile, "--identity", identity, ...args], {
    env,
    stdio: ["ignore", "ignore", "pipe"],
  });
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
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`kioku exited with ${code}:\n${log}`));
    });
  });
  return {
    url,
    log: () => log,
    stop: () =>
      new Promise((resolve) => {
        proc.removeAllListeners("exit");
        proc.once("exit", () => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        });
        proc.kill("SIGTERM");
      }),
  };
}

// --- Calls, with a bearer token, on each surface.

/**
 * Calls kioku: method, path, body (JSON), with Authorization: Bearer
 * token. Returns { status, body } (the body parsed as JSON when it is).
 */
export async function call(base, token, method, p, body) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(base + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body: parsed };
}

/** A kioku.v1 method over Connect with JSON: service.Method, request. */
export function connectCall(base, token, procedure, request) {
  return call(base, token, "POST", `/kioku.v1.${procedure}`, request);
}

/**
 * A kioku.v1 method over gRPC-Web (application/grpc-web+json): returns {
 * status (grpc-status, a number), message, body }.
 */
export async function grpcWebCall(base, token, procedure, request) {
  const json = Buffer.from(JSON.stringify(request));
  const frame = Buffer.alloc(5 + json.length);
  frame.writeUInt32BE(json.length, 1);
  json.copy(frame, 5);
  const res = await fetch(`${base}/kioku.v1.${procedure}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/grpc-web+json", "X-Grpc-Web": "1" },
    body: frame,
  });
  const buf = Buffer.from(await res.arrayBuffer());
  const out = { status: Number(res.headers.get("grpc-status") ?? NaN), message: decodeURIComponent(res.headers.get("grpc-message") ?? ""), body: undefined };
  for (let i = 0; i + 5 <= buf.length; ) {
    const flag = buf[i];
    const n = buf.readUInt32BE(i + 1);
    const data = buf.subarray(i + 5, i + 5 + n);
    i += 5 + n;
    if (flag & 0x80) {
      for (const line of data.toString().split("\r\n")) {
        const [k, ...v] = line.split(":");
        if (k.trim().toLowerCase() === "grpc-status") out.status = Number(v.join(":").trim());
        if (k.trim().toLowerCase() === "grpc-message") out.message = decodeURIComponent(v.join(":").trim());
      }
    } else {
      out.body = JSON.parse(data.toString());
    }
  }
  return out;
}

/** An unsigned JWT (alg none) with the claims. */
export function unsignedToken(claims) {
  const b64 = (o) => Buffer.from(JSON.stringify(o)).toString("base64url");
  return `${b64({ alg: "none", typ: "JWT" })}.${b64(claims)}.`;
}

/** The token with its payload's claims changed, its signature kept. */
export function tampered(token, change) {
  const [h, p, s] = token.split(".");
  const claims = { ...JSON.parse(Buffer.from(p, "base64url").toString()), ...change };
  return `${h}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.${s}`;
}

/** Polls until fn returns a truthy value (at most seconds s). */
export async function eventually(fn, what, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`${what}: not after ${seconds} s`);
    await new Promise((r) => setTimeout(r, 250));
  }
}
