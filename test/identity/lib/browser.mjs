// Headless Chromium driven over the DevTools protocol: just enough to open
// a page, evaluate JavaScript in it and wait for a condition. Chromium:
// $CHROMIUM, or chromium / chromium-browser / google-chrome on the PATH
// (scripts/deps installs Debian's chromium).
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import WebSocket from "ws";

function findChromium() {
  if (process.env.CHROMIUM) return process.env.CHROMIUM;
  for (const name of ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"]) {
    try {
      return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim();
    } catch {
      // not this one
    }
  }
  throw new Error("the browser test needs Chromium: install it (Debian: apt-get install chromium; ./scripts/test does) or set CHROMIUM=/path/to/chromium");
}

/**
 * Starts headless Chromium on url. Returns evaluate(expression) (awaiting
 * promises; the value, or a thrown error with the page's exception),
 * waitFor(expression, what), screenshot(path) and close().
 */
export async function openBrowser(url) {
  const profile = mkdtempSync(join(tmpdir(), "kioku-identity-chromium-"));
  // A process group of its own, so that its helpers end with it.
  const proc = spawn(
    findChromium(),
    ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--remote-debugging-port=0", "--window-size=1280,900", `--user-data-dir=${profile}`, "about:blank"],
    { stdio: ["ignore", "ignore", "pipe"], detached: true },
  );
  let log = "";
  const wsURL = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Chromium did not start in 30 s:\n${log}`)), 30000);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = log.match(/DevTools listening on (ws:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on("exit", (code) => reject(new Error(`Chromium exited with ${code}:\n${log}`)));
  });
  const ws = new WebSocket(wsURL, { perMessageDeflate: false });
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  let next = 0;
  const waiting = new Map();
  ws.on("message", (data) => {
    const msg = JSON.parse(data.toString());
    const w = waiting.get(msg.id);
    if (!w) return;
    waiting.delete(msg.id);
    if (msg.error) w.reject(new Error(`${w.method}: ${msg.error.message}`));
    else w.resolve(msg.result);
  });
  const send = (method, params = {}, sessionId) =>
    new Promise((resolve, reject) => {
      const id = ++next;
      waiting.set(id, { resolve, reject, method });
      ws.send(JSON.stringify({ id, method, params, sessionId }));
    });
  const { targetId } = await send("Target.createTarget", { url });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });

  const evaluate = async (expression) => {
    const r = await send("Runtime.evaluate", { expression, awaitPromise: true, returnByValue: true }, sessionId);
    if (r.exceptionDetails) throw new Error(`in the page: ${r.exceptionDetails.exception?.description ?? r.exceptionDetails.text}`);
    return r.result.value;
  };
  return {
    evaluate,
    waitFor: async (expression, what, seconds = 60) => {
      const deadline = Date.now() + seconds * 1000;
      for (;;) {
        try {
          if (await evaluate(expression)) return;
        } catch {
          // the page is loading
        }
        if (Date.now() > deadline) throw new Error(`${what}: not after ${seconds} s; the page shows: ${await evaluate("document.body.innerText").catch((e) => e.message)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    },
    screenshot: async (path) => {
      const { data } = await send("Page.captureScreenshot", { format: "png" }, sessionId);
      writeFileSync(path, Buffer.from(data, "base64"));
    },
    close: async () => {
      ws.close();
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      process.kill(-proc.pid, "SIGKILL");
      await exited;
      rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
    },
  };
}
