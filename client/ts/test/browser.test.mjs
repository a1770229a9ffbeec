// A browser page using the bundled package (esbuild) with a user key makes
// a round trip against kioku over Connect and gRPC-Web when kioku allows
// the page's origin (--cors-origins), and is refused without it. Headless
// Chromium: $CHROMIUM, or chromium / chromium-browser / google-chrome on
// the PATH (scripts/deps installs Debian's chromium).
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { build } from "esbuild";

import { createKiokuClient, userName } from "../dist/index.js";
import { keyFile, makeKey, startKioku } from "./kioku.mjs";

function findChromium() {
  if (process.env.CHROMIUM) {
    return process.env.CHROMIUM;
  }
  for (const name of ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]) {
    try {
      return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim();
    } catch {
      // not this one
    }
  }
  throw new Error("the browser test needs Chromium: install it (Debian: apt-get install chromium; ./scripts/test does) or set CHROMIUM=/path/to/chromium");
}

let page; // the test's own HTTP server: the page, its bundle, its reports
let results = []; // resolvers waiting for the page's next report
const ann = makeKey("demo", "ann");
const keys = keyFile(ann.entry);
const servers = [];

before(async () => {
  const bundle = await build({
    entryPoints: [new URL("./browser/page.mjs", import.meta.url).pathname],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    write: false,
    alias: { "@kioku-ai/client": new URL("../dist/index.js", import.meta.url).pathname },
  });
  const js = bundle.outputFiles[0].text;
  page = createServer((req, res) => {
    if (req.method === "POST" && req.url === "/result") {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        res.end();
        results.shift()?.(JSON.parse(body));
      });
      return;
    }
    if (req.url === "/page.js") {
      res.setHeader("Content-Type", "text/javascript");
      res.end(js);
      return;
    }
    if (req.url.startsWith("/?")) {
      res.setHeader("Content-Type", "text/html");
      res.end('<!doctype html><title>kioku browser test</title><script type="module" src="/page.js"></script>');
      return;
    }
    res.statusCode = 404;
    res.end();
  });
  await new Promise((resolve) => page.listen(0, "127.0.0.1", resolve));
});

after(async () => {
  page?.close();
  await Promise.all(servers.map((s) => s.stop()));
});

const origin = () => `http://127.0.0.1:${page.address().port}`;

// openPage loads the page in headless Chromium against kioku and returns
// its report.
async function openPage(kiokuURL) {
  const profile = mkdtempSync(join(tmpdir(), "kioku-ts-chromium-"));
  let timer;
  const report = new Promise((resolve, reject) => {
    results.push(resolve);
    timer = setTimeout(() => reject(new Error("the page reported nothing in 60s")), 60_000);
  });
  const url = `${origin()}/?kioku=${encodeURIComponent(kiokuURL)}&key=${encodeURIComponent(ann.key)}`;
  // A process group of its own, so that its helpers end with it.
  const browser = spawn(
    findChromium(),
    ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", `--user-data-dir=${profile}`, url],
    { stdio: "ignore", detached: true },
  );
  const exited = new Promise((resolve) => browser.once("exit", resolve));
  try {
    return await report;
  } finally {
    clearTimeout(timer);
    results = [];
    process.kill(-browser.pid, "SIGKILL");
    await exited;
    rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
  }
}

test("a page of an allowed origin makes a round trip with a user key", async () => {
  const kioku = await startKioku("--auth-keys", keys, "--cors-origins", `https://app.example.com,${origin()}`);
  servers.push(kioku);
  const report = await openPage(kioku.url);
  assert.equal(report.ok, true, JSON.stringify(report));
  const [connect, grpcWeb, other] = report.steps;
  for (const [step, transport] of [[connect, "connect"], [grpcWeb, "grpc-web"]]) {
    assert.equal(step.transport, transport);
    assert.match(step.name, /^apps\/demo\/users\/ann\/sessions\//);
    assert.equal(step.sequence, "1");
    assert.equal(step.text, `hello from ${transport}`);
    assert.deepEqual(step.state, { page: transport, "user:browser": true });
  }
  assert.deepEqual(other, { otherUser: "PermissionDenied" });

  // What the page wrote is on the server.
  const c = createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key });
  const list = await c.sessions.listSessions({ parent: userName("demo", "ann") });
  assert.equal(list.sessions.length, 2);
});

test("without --cors-origins the browser refuses the page's calls", async () => {
  const kioku = await startKioku("--auth-keys", keys);
  servers.push(kioku);
  const report = await openPage(kioku.url);
  assert.equal(report.ok, false);
  // fetch fails before any answer: the preflight was not allowed.
  assert.equal(report.code, "Unknown", JSON.stringify(report));
  assert.match(report.message, /fetch/i);
  const c = createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key });
  const list = await c.sessions.listSessions({ parent: userName("demo", "ann") });
  assert.equal(list.sessions.length, 0, "nothing reached the server");
});
