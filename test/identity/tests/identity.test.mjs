// ID tokens as kioku identities, end to end on loopback: a kioku started
// with --identity naming the Firebase Auth emulator's project (app
// companion) and an oidc-provider issuer (app web), and with
// FIREBASE_AUTH_EMULATOR_HOST naming the emulator. A token of each reaches
// its own user's sessions, state and memories on every surface (kioku.v1
// over Connect and gRPC-Web, REST, the Vertex AI surface); another user's
// or another app's resources are refused; bad tokens are UNAUTHENTICATED
// with a message naming what was wrong; the issuer's key rotation is
// picked up without a restart, and the issuer down changes nothing for
// tokens signed with cached keys; and a minted user token (MintUserToken)
// reaches its user as an ID token does.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  call,
  connectCall,
  eventually,
  firebaseProject,
  grpcWebCall,
  newKey,
  newSigningKey,
  newSigningKeyFile,
  signer,
  startAuthEmulator,
  startKioku,
  startOIDC,
  tampered,
  unsignedToken,
} from "../lib/harness.mjs";

// gRPC status codes, as gRPC-Web's grpc-status carries them.
const PERMISSION_DENIED = 7;
const UNAUTHENTICATED = 16;

let oidc, emulator, kioku;
const backend = newKey("companion-backend", "companion");

before(async () => {
  oidc = await startOIDC();
  emulator = await startAuthEmulator();
  kioku = await startKioku({
    providers: [
      { type: "firebase", project: firebaseProject, app: "companion" },
      { type: "oidc", issuer: oidc.issuer, audience: "kioku", app: "web", user_claim: "sub" },
    ],
    keys: [backend.entry],
    emulator: emulator.host,
    args: ["--token-signing-key-file", newSigningKeyFile()],
  });
});

after(async () => {
  await kioku?.stop();
  await emulator?.stop();
  await oidc?.stop();
});

/** Asserts a Connect or REST answer's HTTP status and error code. */
function refused(res, status, code, message) {
  assert.equal(res.status, status, JSON.stringify(res.body));
  const got = typeof res.body.code === "string" ? res.body.code : res.body.status ?? res.body.code;
  assert.ok(
    [code, code.toUpperCase(), { unauthenticated: 16, permission_denied: 7, not_found: 5 }[code]].includes(got),
    `code ${JSON.stringify(got)}, want ${code}: ${JSON.stringify(res.body)}`,
  );
  if (message) assert.match(res.body.message, message);
}

/**
 * The surfaces one user's token reaches, checked for app and user:
 * kioku.v1 over Connect (CreateSession, AppendEvent, CreateMemory), REST
 * (the user's sessions, state and memories), gRPC-Web (GetState), and the
 * Vertex AI surface (the session, Google's REST shape).
 */
async function reachesOwn(token, app, user) {
  const parent = `apps/${app}/users/${user}`;
  let res = await connectCall(kioku.url, token, "SessionService/CreateSession", { parent, session: { displayName: "signed in" } });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const session = res.body.name;
  assert.ok(session.startsWith(`${parent}/sessions/`), session);

  res = await connectCall(kioku.url, token, "SessionService/AppendEvent", {
    name: session,
    event: { author: "user", content: { role: "user", parts: [{ text: "hello" }] }, actions: { stateDelta: { "user:color": "blue" } } },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));

  res = await call(kioku.url, token, "GET", `/v1/${parent}/sessions`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(res.body.sessions.map((s) => s.name), [session]);

  res = await call(kioku.url, token, "PATCH", `/v1/${parent}/state`, { "user:nickname": user.slice(0, 8) });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  res = await call(kioku.url, token, "GET", `/v1/${parent}/state`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.state["user:color"], "blue");

  const g = await grpcWebCall(kioku.url, token, "SessionService/GetState", { name: `${parent}/state` });
  assert.equal(g.status, 0, g.message);
  assert.equal(g.body.state["user:nickname"], user.slice(0, 8));

  res = await connectCall(kioku.url, token, "MemoryBankService/CreateMemory", {
    parent: `apps/${app}`,
    memory: { fact: `${user} likes tea.`, scope: { user_id: user } },
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  res = await call(kioku.url, token, "POST", `/v1/apps/${app}/memories:retrieve`, { scope: { user_id: user } });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(res.body.retrievedMemories.map((m) => m.memory.fact), [`${user} likes tea.`]);

  const id = session.split("/").pop();
  res = await call(kioku.url, token, "GET", `/v1beta1/projects/my-project/locations/us-central1/reasoningEngines/${app}/sessions/${id}`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.userId, user);
  return session;
}

/** Asserts that the token reaches nothing of another user or app. */
async function refusedElsewhere(token, app, session, otherApp) {
  const [, , , otherUser] = session.split("/");
  let res = await call(kioku.url, token, "GET", `/v1/${session}`);
  refused(res, 403, "permission_denied");
  res = await call(kioku.url, token, "GET", `/v1/apps/${app}/users/${otherUser}/state`);
  refused(res, 403, "permission_denied");
  res = await connectCall(kioku.url, token, "SessionService/CreateSession", { parent: `apps/${app}/users/${otherUser}` });
  refused(res, 403, "permission_denied");
  res = await connectCall(kioku.url, token, "MemoryBankService/RetrieveMemories", { parent: `apps/${app}`, scope: { user_id: otherUser } });
  refused(res, 403, "permission_denied");
  const g = await grpcWebCall(kioku.url, token, "SessionService/GetSession", { name: session });
  assert.equal(g.status, PERMISSION_DENIED, g.message);
  // Vertex AI answers another user's session as absent.
  res = await call(kioku.url, token, "GET", `/v1beta1/projects/my-project/locations/us-central1/reasoningEngines/${app}/sessions/${session.split("/").pop()}`);
  assert.ok([403, 404].includes(res.status), JSON.stringify(res.body));
  // Another app, even for a user of the same id.
  res = await call(kioku.url, token, "GET", `/v1/apps/${otherApp}/users/${otherUser}/sessions`);
  refused(res, 403, "permission_denied");
  res = await connectCall(kioku.url, token, "SessionService/GetState", { name: `apps/${otherApp}/state` });
  refused(res, 403, "permission_denied");
}

/** Another user's session in app, created with the backend's app key. */
async function othersSession(app, user) {
  const res = await connectCall(kioku.url, backend.secret, "SessionService/CreateSession", { parent: `apps/${app}/users/${user}` });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.name;
}

describe("a Firebase Auth emulator token", () => {
  test("reaches its own user's sessions, state and memories on every surface", async () => {
    const { uid, idToken } = await emulator.signUp();
    await reachesOwn(idToken, "companion", uid);
  });

  test("is refused another user's or another app's resources", async () => {
    const { idToken } = await emulator.signUp();
    const other = await emulator.signUp();
    await refusedElsewhere(idToken, "companion", await othersSession("companion", other.uid), "web");
  });
});

describe("an oidc-provider token", () => {
  test("reaches its own user's sessions, state and memories on every surface", async () => {
    await reachesOwn(await oidc.idToken("alice"), "web", "alice");
  });

  test("is refused another user's or another app's resources", async () => {
    const token = await oidc.idToken("bob");
    // The other user's session, made with bob's neighbour's own token.
    const carol = await oidc.idToken("carol");
    const res = await connectCall(kioku.url, carol, "SessionService/CreateSession", { parent: "apps/web/users/carol" });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await refusedElsewhere(token, "web", res.body.name, "companion");
  });
});

describe("a bad token is UNAUTHENTICATED and says why", () => {
  const now = () => Math.floor(Date.now() / 1000);
  const cases = [
    ["expired", () => oidc.idToken("alice", { expiresAt: now() - 3600 }), /expired/],
    ["of another audience", () => oidc.idToken("alice", { client: "other" }), /audience/],
    ["of an issuer not in the identity file", () => signer("http://127.0.0.1:9/other-issuer").idToken("alice"), /issuer/],
    ["with a tampered signature", async () => tampered(await oidc.idToken("alice"), { sub: "mallory" }), /signature/],
    ["unsigned (alg none) for the oidc issuer, though the server takes the emulator's", () =>
      unsignedToken({ iss: oidc.issuer, aud: "kioku", sub: "alice", iat: now(), exp: now() + 600 }), /alg none|not signed/],
    ["signed with a key the issuer does not publish (unknown kid, after a refresh)", () =>
      oidc.signer(newSigningKey("not-published")).idToken("alice"), /not-published/],
  ];
  for (const [what, token, message] of cases) {
    test(what, async () => {
      const t = await token();
      let res = await connectCall(kioku.url, t, "SessionService/ListSessions", { parent: "apps/web/users/alice" });
      refused(res, 401, "unauthenticated", message);
      res = await call(kioku.url, t, "GET", "/v1/apps/web/users/alice/sessions");
      refused(res, 401, "unauthenticated", message);
      const g = await grpcWebCall(kioku.url, t, "SessionService/GetState", { name: "apps/web/users/alice/state" });
      assert.equal(g.status, UNAUTHENTICATED, g.message);
      assert.match(g.message, message);
    });
  }

  test("the Auth emulator's unsigned token, on a server without FIREBASE_AUTH_EMULATOR_HOST", async () => {
    const strict = await startKioku({
      providers: [{ type: "firebase", project: firebaseProject, app: "companion" }],
      keys: [backend.entry],
    });
    try {
      const { uid, idToken } = await emulator.signUp();
      const res = await call(strict.url, idToken, "GET", `/v1/apps/companion/users/${uid}/sessions`);
      refused(res, 401, "unauthenticated", /alg none|not signed/);
    } finally {
      await strict.stop();
    }
  });
});

describe("the issuer's keys", () => {
  test("a rotation at the issuer is picked up without a restart", async () => {
    const before = await oidc.idToken("dave");
    let res = await call(kioku.url, before, "GET", "/v1/apps/web/users/dave/sessions");
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const fetches = oidc.fetches;
    await oidc.rotate(newSigningKey("key-2"));
    const next = await oidc.idToken("dave");
    assert.match(Buffer.from(next.split(".")[0], "base64url").toString(), /"kid":"key-2"/);
    // kioku refetches the key set on an unknown kid, at a bounded rate.
    await eventually(async () => (await call(kioku.url, next, "GET", "/v1/apps/web/users/dave/sessions")).status === 200, "a token of the new key accepted", 60);
    assert.ok(oidc.fetches > fetches, "kioku fetched the issuer's keys again");
  });

  test("the issuer down changes nothing for tokens signed with cached keys", async () => {
    const fresh = await oidc.idToken("erin"); // the key in force, cached by kioku
    const res = await call(kioku.url, fresh, "GET", "/v1/apps/web/users/erin/sessions");
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await oidc.stop();
    try {
      for (let i = 0; i < 5; i++) {
        // A token kioku has never seen, signed with the cached key.
        const t = await oidc.idToken(`erin-${i}`);
        const r = await call(kioku.url, t, "GET", `/v1/apps/web/users/erin-${i}/sessions`);
        assert.equal(r.status, 200, JSON.stringify(r.body));
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    } finally {
      await oidc.start();
    }
  });
});

describe("a minted user token", () => {
  test("reaches its own user's resources on every surface, and nothing else", async () => {
    // MintUserToken takes an app key, of the user's app only.
    let res = await call(kioku.url, backend.secret, "POST", "/v1/apps/web/users/frank:mintToken", { ttl: "600s" });
    refused(res, 403, "permission_denied");
    res = await call(kioku.url, backend.secret, "POST", "/v1/apps/companion/users/frank:mintToken", { ttl: "600s" });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const { token, expireTime } = res.body;
    assert.ok(Math.abs(Date.parse(expireTime) - Date.now() - 600_000) < 60_000, expireTime);
    await reachesOwn(token, "companion", "frank");
    await refusedElsewhere(token, "companion", await othersSession("companion", "grace"), "web");
    // A user's token mints nothing.
    res = await connectCall(kioku.url, token, "AuthService/MintUserToken", { parent: "apps/companion/users/frank" });
    refused(res, 403, "permission_denied");
  });
});
