// The companion demo signed in with Firebase Authentication, in headless
// Chromium: its page signs in anonymously through the Auth emulator with
// the Firebase JS SDK (the firebase npm package's browser builds, served by
// the app), and calls kioku directly with its ID token: it lists its own
// sessions, and is refused another user's session and another app's.
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import { openBrowser } from "../lib/browser.mjs";
import { connectCall, call, firebaseProject, freePort, newKey, repoRoot, startAuthEmulator, startCompanion, startKioku } from "../lib/harness.mjs";

const backend = newKey("companion-backend", "companion");
const started = [];
let emulator, kioku, companion;

before(async () => {
  emulator = await startAuthEmulator();
  started.push(emulator);
  const port = await freePort();
  kioku = await startKioku({
    providers: [{ type: "firebase", project: firebaseProject, app: "companion" }],
    keys: [backend.entry],
    emulator: emulator.host,
    args: ["--cors-origins", `http://127.0.0.1:${port}`],
  });
  started.push(kioku);
  companion = await startCompanion(port, [
    "--kioku", kioku.url, "--kioku-key", backend.secret,
    "--firebase-project", firebaseProject, "--firebase-auth-emulator", emulator.host,
    "--firebase-sdk", path.join(repoRoot, "test", "identity", "node_modules", "firebase"),
  ]);
  started.push(companion);
});

after(async () => {
  for (const s of started.reverse()) await s.stop();
});

test("the page signs in through the Auth emulator and calls kioku with its ID token", async () => {
  const browser = await openBrowser(companion.url);
  const dir = process.env.TEST_ARTIFACTS_DIR;
  try {
    await browser.waitFor(`!document.getElementById("signin-firebase").hidden`, "the page offering the sign-in with Firebase");
    await browser.evaluate(`document.getElementById("signin-name").value = "Ann"; document.getElementById("signin-btn").click(); true`);
    await browser.waitFor(`document.getElementById("direct").textContent.includes("kioku lists 1 session of yours")`, "the page listing its session from kioku");
    const uid = await browser.evaluate("firebase.auth.currentUser.uid");
    assert.match(uid, /^[A-Za-z0-9]{20,}$/);

    // The app signed in the user kioku accepted the token for: its day,
    // and the name as the nickname.
    let res = await call(kioku.url, backend.secret, "GET", `/v1/apps/companion/users/${uid}/sessions`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.sessions.length, 1);
    res = await call(kioku.url, backend.secret, "GET", `/v1/apps/companion/users/${uid}/state`);
    assert.equal(res.body.state["user:nickname"], "Ann");

    // From the page, with its ID token: another user's session and
    // another app's sessions are refused.
    res = await connectCall(kioku.url, backend.secret, "SessionService/CreateSession", { parent: "apps/companion/users/someone-else" });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const other = await browser.evaluate(`kiokuCall("GET", "/v1/${res.body.name}")`);
    assert.equal(other.status, 403, JSON.stringify(other));
    assert.equal(other.body.code, 7, JSON.stringify(other)); // PERMISSION_DENIED
    const otherApp = await browser.evaluate(`kiokuCall("GET", "/v1/apps/web/users/${uid}/sessions")`);
    assert.equal(otherApp.status, 403, JSON.stringify(otherApp));
    const own = await browser.evaluate(`kiokuCall("GET", "/v1/apps/companion/users/${uid}/state")`);
    assert.equal(own.status, 200, JSON.stringify(own));
    assert.equal(own.body.state["user:nickname"], "Ann");
    if (dir) {
      mkdirSync(dir, { recursive: true });
      await browser.screenshot(path.join(dir, "companion-firebase.png"));
    }
  } catch (err) {
    if (dir) await browser.screenshot(path.join(dir, "companion-firebase-failure.png")).catch(() => {});
    throw new Error(`${err.message}\ncompanion log:\n${companion.log()}\nkioku log:\n${kioku.log()}`, { cause: err });
  } finally {
    await browser.close();
  }
});

test("the app signs in no one without an ID token kioku accepts", async () => {
  let res = await fetch(`${companion.url}/api/signin`, { method: "POST", body: JSON.stringify({ name: "Ann" }) });
  assert.equal(res.status, 400);
  assert.match((await res.json()).error, /id_token/);
  res = await fetch(`${companion.url}/api/signin`, { method: "POST", body: JSON.stringify({ name: "Ann", id_token: "a.b.c" }) });
  assert.ok([400, 401].includes(res.status), String(res.status));
});
