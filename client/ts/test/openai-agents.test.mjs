// The OpenAI Agents SDK for JavaScript (@openai/agents, its real Runner
// and OpenAI model over HTTP, against a fake model) with KiokuSession on a
// real kioku behind user keys: a conversation kept across two runs (and
// two session objects), the events kioku sees, popItem, limits, clear,
// and another user's key refused.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Agent, OpenAIProvider, Runner } from "@openai/agents";

import { Code, ConnectError, createKiokuClient, sessionName, userName } from "../dist/index.js";
import { KiokuSession } from "../dist/openai-agents.js";
import { startFakeModel } from "./fakemodel.mjs";
import { keyFile, makeKey, startKioku } from "./kioku.mjs";

let kioku;
let model;
const ann = makeKey("demo", "ann");
const bob = makeKey("demo", "bob");
before(async () => {
  kioku = await startKioku("--auth-keys", keyFile(ann.entry, bob.entry));
  // The fake answers the name only when the request holds the first turn.
  model = await startFakeModel((body) => {
    const said = JSON.stringify(body.input);
    if (!said.includes("What is my name?")) {
      return "Nice to meet you, Ann.";
    }
    return said.includes("My name is Ann.") ? "Your name is Ann." : "I do not know your name.";
  });
});
after(async () => {
  await kioku?.stop();
  await model?.close();
});

const text = (item) => (typeof item.content === "string" ? item.content : item.content.map((c) => c.text).join(""));

test("a conversation kept in kioku across two runs", async () => {
  const client = createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key });
  const runner = new Runner({ modelProvider: new OpenAIProvider({ apiKey: "fake", baseURL: model.baseURL, useResponses: true }), tracingDisabled: true });
  const agent = new Agent({ name: "assistant", instructions: "Answer briefly.", model: "gpt-test" });

  const first = await runner.run(agent, "My name is Ann.", { session: new KiokuSession({ client, user: userName("demo", "ann"), sessionId: "chat-1" }) });
  assert.equal(first.finalOutput, "Nice to meet you, Ann.");

  // A new session object, as after a restart: the history is kioku's.
  const session = new KiokuSession({ client, user: userName("demo", "ann"), sessionId: "chat-1" });
  const second = await runner.run(agent, "What is my name?", { session });
  assert.equal(second.finalOutput, "Your name is Ann.");

  const input = model.requests.at(-1).body.input;
  assert.deepEqual(
    input.map((i) => [i.role, text(i)]),
    [
      ["user", "My name is Ann."],
      ["assistant", "Nice to meet you, Ann."],
      ["user", "What is my name?"],
    ],
  );

  // kioku sees the conversation: each item one event, with its text.
  const stored = await client.sessions.getSession({ name: sessionName("demo", "ann", "chat-1") });
  assert.deepEqual(
    stored.events.map((e) => [e.author, e.content?.role, e.content?.parts[0]?.text]),
    [
      ["user", "user", "My name is Ann."],
      ["agent", "model", "Nice to meet you, Ann."],
      ["user", "user", "What is my name?"],
      ["agent", "model", "Your name is Ann."],
    ],
  );
  const found = await client.sessions.searchEvents({ parent: userName("demo", "ann"), query: "name Ann" });
  assert.ok(found.results.length >= 2, `search found ${found.results.length}`);
  assert.equal(await session.getSessionId(), "chat-1");
});

test("popItem, limits and clearSession", async () => {
  const client = createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key });
  const session = new KiokuSession({ client, user: userName("demo", "ann"), sessionId: "chat-2" });
  assert.deepEqual(await session.getItems(), []);
  assert.equal(await session.popItem(), undefined);

  const items = ["one", "two", "three"].map((t) => ({ type: "message", role: "user", content: t }));
  await session.addItems(items);
  await session.addItems([{ type: "function_call", callId: "c1", name: "lookup", arguments: '{"q":"tea"}', status: "completed" }]);
  assert.deepEqual((await session.getItems()).map((i) => i.content ?? i.name), ["one", "two", "three", "lookup"]);
  assert.deepEqual((await session.getItems(2)).map((i) => i.content ?? i.name), ["three", "lookup"]);

  assert.equal((await session.popItem()).name, "lookup");
  assert.equal((await session.popItem()).content, "three");
  // Another object on the same session sees the pops (they are events).
  const again = new KiokuSession({ client, user: userName("demo", "ann"), sessionId: "chat-2" });
  assert.deepEqual((await again.getItems()).map((i) => i.content), ["one", "two"]);
  assert.deepEqual((await again.getItems(1)).map((i) => i.content), ["two"]);
  await again.addItems([{ type: "message", role: "user", content: "four" }]);
  assert.deepEqual((await session.getItems()).map((i) => i.content), ["one", "two", "four"]);

  // The function call's event carries it as kioku's function call.
  const events = (await client.sessions.listEvents({ parent: session.name })).events;
  assert.deepEqual(events[3].content.parts[0].functionCall.args, { q: "tea" });
  assert.deepEqual(events[4].extensions, { openai_agents: { pop: events[3].id } });

  await session.clearSession();
  await assert.rejects(client.sessions.getSession({ name: session.name }), (e) => e instanceof ConnectError && e.code === Code.NotFound);
  assert.deepEqual(await session.getItems(), []);
  await session.addItems([{ type: "message", role: "user", content: "five" }]);
  assert.deepEqual((await again.getItems()).map((i) => i.content), ["five"]);
});

test("another user's key reaches nothing of ann's session", async () => {
  const client = createKiokuClient({ baseUrl: kioku.url, apiKey: bob.key });
  const session = new KiokuSession({ client, user: userName("demo", "ann"), sessionId: "chat-1" });
  const denied = (e) => e instanceof ConnectError && e.code === Code.PermissionDenied;
  await assert.rejects(session.getItems(), denied);
  await assert.rejects(session.addItems([{ type: "message", role: "user", content: "hi" }]), denied);
  await assert.rejects(session.popItem(), denied);
  await assert.rejects(session.clearSession(), denied);
});
