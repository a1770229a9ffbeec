// The agent engines module of @google-cloud/vertexai (the TypeScript port of
// the Vertex AI SDK's agent_engines, which ADK for TypeScript uses) against
// kioku over REST. Its Client always loads Application Default
// Credentials: they come from a fake metadata server on loopback, whose
// token is any string for a kioku without keys, and a kioku API key for a
// kioku with --auth-keys.
import { escapes, eventually, newKey, startGemini, startKioku, startMetadata, engine, engineId, location, project } from "../lib/harness.mjs";

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Client } from "@google-cloud/vertexai";

/** Waits for an operation with get (the module's operation getter). */
async function done(op, get) {
  return eventually(async () => {
    if (op.done) return op;
    op = await get({ operationName: op.name });
    return op.done ? op : null;
  }, `operation ${op.name}`);
}

describe("@google-cloud/vertexai agent engines", () => {
  let gemini, metadata, kioku, ae;
  before(async () => {
    gemini = await startGemini();
    metadata = await startMetadata();
    kioku = await startKioku({ gemini });
    ae = new Client({ project, location, apiEndpoint: kioku.url })._agentEnginesInternal;
  });
  after(async () => {
    await kioku?.stop();
    gemini?.close();
    metadata?.close();
    assert.deepEqual(escapes, [], "connections beyond loopback");
    assert.ok(metadata.state.tokens > 0, "the Client took no token from the metadata server");
  });

  test("sessions: create, get, list with a filter, update, append and list events, delete", async () => {
    const s = ae.sessions;
    let op = await s.createInternal({ name: engine, userId: "ann", config: { sessionId: "s1", displayName: "first", sessionState: { mood: "calm" }, labels: { team: "core" } } });
    op = await done(op, (p) => s.getSessionOperationInternal(p));
    const name = op.response.name;
    assert.equal(name, `${engine}/sessions/s1`);
    await s.createInternal({ name: engine, userId: "bob", config: { sessionId: "s2" } });

    const got = await s.get({ name });
    assert.equal(got.displayName, "first");
    assert.deepEqual(got.sessionState, { mood: "calm" });

    const list = await s.listInternal({ name: engine, config: { filter: 'user_id="ann" OR user_id="bob"', pageSize: 5000 } });
    assert.deepEqual(list.sessions.map((x) => x.name.split("/").pop()).sort(), ["s1", "s2"]);

    await s.updateInternal({ name, config: { displayName: "renamed", updateMask: "display_name" } });
    assert.equal((await s.get({ name })).displayName, "renamed");

    await s.events.append({
      name,
      author: "user",
      invocationId: "i1",
      timestamp: "2026-01-02T03:04:05Z",
      config: { content: { role: "user", parts: [{ text: "hello" }] }, actions: { stateDelta: { turn: 1 } } },
    });
    await s.events.append({ name, author: "model", invocationId: "i1", timestamp: "2026-01-02T03:04:06Z", config: { content: { role: "model", parts: [{ text: "hi" }] } } });
    const events = await s.events.listInternal({ name, config: { filter: 'timestamp>="2026-01-02T03:04:06Z"' } });
    assert.deepEqual(events.sessionEvents.map((e) => e.author), ["model"]);
    assert.equal((await s.get({ name })).sessionState.turn, 1);

    // delete sends "{}" as its body.
    const del = await s.delete({ name: `${engine}/sessions/s2` });
    assert.ok(del.name, "the delete operation");
    await assert.rejects(s.get({ name: `${engine}/sessions/s2` }), /404|NOT_FOUND/);
  });

  test("memories: create, get, list, update, revisions and rollback, generate, retrieve, ingestEvents, purge, delete", async () => {
    const m = ae.memories;
    const scope = { user_id: "cy" };
    let op = await m.createInternal({
      name: engine,
      fact: "Cy prefers green tea.",
      scope,
      config: { memoryId: "tea", topics: [{ customMemoryTopicLabel: "DRINKS" }], metadata: { source: { stringValue: "chat" } } },
    });
    op = await done(op, (p) => m.getMemoryOperationInternal(p));
    const name = op.response.name;
    assert.equal(name, `${engine}/memories/tea`);
    const got = await m.get({ name });
    assert.equal(got.fact, "Cy prefers green tea.");
    assert.deepEqual(got.topics, [{ customMemoryTopicLabel: "DRINKS" }]);
    assert.deepEqual(got.metadata, { source: { stringValue: "chat" } });

    const listed = await m.listInternal({ name: engine, config: { filter: 'scope.user_id="cy"' } });
    assert.deepEqual(listed.memories.map((x) => x.name), [name]);

    await done(await m.updateInternal({ name, config: { updateMask: "fact" }, fact: "Cy prefers jasmine tea.", scope }), (p) => m.getMemoryOperationInternal(p));
    assert.equal((await m.get({ name })).fact, "Cy prefers jasmine tea.");

    const revisions = await m.revisions.listInternal({ name });
    assert.deepEqual(revisions.memoryRevisions.map((r) => r.fact), ["Cy prefers jasmine tea.", "Cy prefers green tea."]);
    const first = revisions.memoryRevisions[1].name;
    assert.equal((await m.revisions.get({ name: first })).fact, "Cy prefers green tea.");
    const back = await m.rollbackInternal({ name, targetRevisionId: first.split("/").pop() });
    assert.ok(back.done);
    assert.equal((await m.get({ name })).fact, "Cy prefers green tea.");

    // Generation: direct memories, inline events (generate and
    // ingestEvents), polled until done.
    let gen = await m.generateInternal({ name: engine, directMemoriesSource: { directMemories: [{ fact: "Cy lives in Lyon." }] }, scope });
    gen = await done(gen, (p) => m.getGenerateMemoriesOperationInternal(p));
    assert.equal(gen.response.generatedMemories[0].memory.fact, "Cy lives in Lyon.");
    gen = await m.generateInternal({ name: engine, directContentsSource: { events: [{ content: { role: "user", parts: [{ text: "I play the cello." }] } }] }, scope });
    gen = await done(gen, (p) => m.getGenerateMemoriesOperationInternal(p));
    assert.equal(gen.response.generatedMemories[0].memory.fact, "The user said: I play the cello.");
    let ingest = await m.ingestEventsInternal({
      name: engine,
      streamId: "stream-1",
      scope,
      directContentsSource: { events: [{ eventId: "e1", content: { role: "user", parts: [{ text: "I am vegetarian." }] } }] },
      config: { forceFlush: true },
    });
    ingest = await done(ingest, (p) => m.getGenerateMemoriesOperationInternal(p));
    assert.equal(ingest.response.generatedMemories[0].memory.fact, "The user said: I am vegetarian.");

    const similar = await m.retrieveInternal({ name: engine, scope, similaritySearchParams: { searchQuery: "cello", topK: 1 } });
    assert.equal(similar.retrievedMemories[0].memory.fact, "The user said: I play the cello.");
    const all = await m.retrieveInternal({ name: engine, scope, simpleRetrievalParams: { pageSize: 10 } });
    assert.equal(all.retrievedMemories.length, 4);

    const del = await m.delete({ name });
    assert.ok(del.name, "the delete operation");
    await assert.rejects(m.get({ name }), /404|NOT_FOUND/);

    // purge counts, then deletes, the scope's memories.
    let purge = await m.purgeInternal({ name: engine, filter: 'scope.user_id="cy"' });
    purge = await done(purge, (p) => m.getGenerateMemoriesOperationInternal(p));
    assert.equal(String(purge.response.purgeCount), "3");
    purge = await m.purgeInternal({ name: engine, filter: 'scope.user_id="cy"', force: true });
    await done(purge, (p) => m.getGenerateMemoriesOperationInternal(p));
    const left = await m.listInternal({ name: engine, config: { filter: 'scope.user_id="cy"' } });
    assert.deepEqual(left.memories ?? [], []);
  });
});

describe("@google-cloud/vertexai agent engines, kioku with API keys", () => {
  let metadata, kioku, ae;
  before(async () => {
    const [appKey, appEntry] = newKey("backend", engineId);
    // The Client sends its Application Default Credentials' token as
    // Authorization: Bearer: the metadata server hands out the kioku key.
    metadata = await startMetadata({ token: appKey });
    kioku = await startKioku({ keys: [appEntry] });
    ae = new Client({ project, location, apiEndpoint: kioku.url })._agentEnginesInternal;
  });
  after(async () => {
    await kioku?.stop();
    metadata?.close();
    assert.deepEqual(escapes, [], "connections beyond loopback");
  });

  test("the key, as the ADC token, reaches the engine's sessions; another token does not", async () => {
    let op = await ae.sessions.createInternal({ name: engine, userId: "ann", config: { sessionId: "keyed" } });
    assert.equal(op.response?.name ?? (await ae.sessions.get({ name: `${engine}/sessions/keyed` })).name, `${engine}/sessions/keyed`);
    metadata.state.token = "not-a-kioku-key";
    const other = new Client({ project, location, apiEndpoint: kioku.url })._agentEnginesInternal;
    await assert.rejects(other.sessions.get({ name: `${engine}/sessions/keyed` }), /401|UNAUTHENTICATED/);
  });
});
