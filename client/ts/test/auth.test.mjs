// API keys through the TypeScript client: errors surface as ConnectErrors
// with the server's code.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Code, ConnectError, createKiokuClient, sessionName, userName } from "../dist/index.js";
import { keyFile, makeKey, startKioku } from "./kioku.mjs";

let kioku;
const app = makeKey("demo");
const ann = makeKey("demo", "ann");
before(async () => {
  kioku = await startKioku("--auth-keys", keyFile(app.entry, ann.entry));
});
after(() => kioku?.stop());

const rejectsWith = (promise, code, pattern) =>
  assert.rejects(promise, (err) => {
    assert.ok(err instanceof ConnectError, `${err} is not a ConnectError`);
    assert.equal(err.code, code, `${err.rawMessage}: code ${Code[err.code]}, want ${Code[code]}`);
    assert.match(err.rawMessage, pattern);
    return true;
  });

test("without a key the call is Unauthenticated", async () => {
  const c = createKiokuClient({ baseUrl: kioku.url });
  await rejectsWith(c.sessions.createSession({ parent: userName("demo", "ann") }), Code.Unauthenticated, /API key/i);
});

test("an unknown key is Unauthenticated", async () => {
  const c = createKiokuClient({ baseUrl: kioku.url, apiKey: "kioku_not-a-key" });
  await rejectsWith(c.sessions.createSession({ parent: userName("demo", "ann") }), Code.Unauthenticated, /./);
});

test("an app key reaches its app only", async () => {
  const c = createKiokuClient({ baseUrl: kioku.url, apiKey: app.key });
  const s = await c.sessions.createSession({ parent: userName("demo", "bob"), sessionId: "b1" });
  assert.equal(s.name, sessionName("demo", "bob", "b1"));
  await rejectsWith(c.sessions.createSession({ parent: userName("other", "bob") }), Code.PermissionDenied, /may reach app "demo" only/);
});

test("a user key reaches its user only, over both transports", async () => {
  for (const transport of ["connect", "grpc-web"]) {
    const c = createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key, transport });
    const s = await c.sessions.createSession({ parent: userName("demo", "ann") });
    assert.match(s.name, /^apps\/demo\/users\/ann\/sessions\//);
    await rejectsWith(c.sessions.getSession({ name: sessionName("demo", "bob", "b1") }), Code.PermissionDenied, /ann/);
    await rejectsWith(c.sessions.updateState({ name: "apps/demo/state", stateDelta: { "app:x": 1 } }), Code.PermissionDenied, /./);
  }
});
