// ADK for TypeScript's Vertex AI services, VertexAiSessionService and
// VertexAiMemoryBankService, against kioku: each is given a client of the
// agent engines module (@google-cloud/vertexai) pointed at kioku
// (apiEndpoint), whose Application Default Credentials come from a fake
// metadata server on loopback.
import { escapes, eventually, startGemini, startKioku, startMetadata, engine, engineId, location, project } from "../lib/harness.mjs";

import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { after, before, describe, test } from "node:test";

import { Client } from "@google-cloud/vertexai";
import { VertexAiMemoryBankService, VertexAiSessionService, createEvent, createEventActions } from "@google/adk";

describe("ADK for TypeScript", () => {
  let gemini, metadata, kioku, client, sessions, memory;
  before(async () => {
    gemini = await startGemini();
    metadata = await startMetadata();
    kioku = await startKioku({ gemini });
    client = new Client({ project, location, apiEndpoint: kioku.url });
    sessions = new VertexAiSessionService({ projectId: project, location, agentEngineId: engineId, sessions: client.agentEnginesInternal.sessions });
    memory = new VertexAiMemoryBankService({ projectId: project, location, agentEngineId: engineId, client });
  });
  after(async () => {
    await kioku?.stop();
    gemini?.close();
    metadata?.close();
    assert.deepEqual(escapes, [], "connections beyond loopback");
  });

  test("VertexAiSessionService: create, append with state deltas, get, list, delete", async () => {
    const appName = engineId; // ADK takes a numeric app name as the engine id
    const s = await sessions.createSession({ appName, userId: "ann", state: { mood: "calm", "temp:scratch": 1 }, sessionId: "adk-1" });
    assert.equal(s.id, "adk-1");
    assert.deepEqual(s.state, { mood: "calm" });
    const t0 = Date.parse("2026-03-04T05:06:07Z");
    await sessions.appendEvent({
      session: s,
      event: createEvent({
        author: "user",
        invocationId: "inv-1",
        timestamp: t0,
        content: { role: "user", parts: [{ text: "My favourite colour is teal." }] },
        actions: createEventActions({ stateDelta: { turn: 1, "user:colour": "teal" } }),
      }),
    });
    await sessions.appendEvent({
      session: s,
      event: createEvent({ author: "assistant", invocationId: "inv-1", timestamp: t0 + 1000, content: { role: "model", parts: [{ text: "Noted." }] } }),
    });
    const got = await sessions.getSession({ appName, userId: "ann", sessionId: "adk-1" });
    assert.deepEqual(got.events.map((e) => e.author), ["user", "assistant"]);
    assert.equal(got.state.turn, 1);
    assert.equal(got.state["user:colour"], "teal");
    const recent = await sessions.getSession({ appName, userId: "ann", sessionId: "adk-1", config: { afterTimestamp: t0 + 500 } });
    assert.deepEqual(recent.events.map((e) => e.author), ["assistant"]);

    await sessions.createSession({ appName, userId: "ann", sessionId: "adk-2" });
    await sessions.createSession({ appName, userId: "bob", sessionId: "adk-3" });
    const listed = await sessions.listSessions({ appName, userId: "ann" });
    assert.deepEqual(listed.sessions.map((x) => x.id).sort(), ["adk-1", "adk-2"]);

    await sessions.deleteSession({ appName, userId: "ann", sessionId: "adk-2" });
    assert.equal(await sessions.getSession({ appName, userId: "ann", sessionId: "adk-2" }), undefined);
  });

  test("VertexAiMemoryBankService: addSessionToMemory, addEventsToMemory, searchMemory", async () => {
    const appName = engineId;
    const s = await sessions.createSession({ appName, userId: "cy", sessionId: "mem-1" });
    await sessions.appendEvent({
      session: s,
      event: createEvent({ author: "user", invocationId: "i1", timestamp: Date.now(), content: { role: "user", parts: [{ text: "I grow tomatoes on my balcony." }] } }),
    });
    const withEvents = await sessions.getSession({ appName, userId: "cy", sessionId: "mem-1" });
    await memory.addSessionToMemory(withEvents);
    await memory.addEventsToMemory({
      appName,
      userId: "cy",
      events: [createEvent({ author: "user", content: { role: "user", parts: [{ text: "I cycle to work." }] } })],
    });
    // ADK does not wait for the generation: search until it is done.
    const deadline = Date.now() + 20000;
    let found;
    do {
      found = await memory.searchMemory({ appName, userId: "cy", query: "tomatoes balcony" });
    } while (found.memories.length < 2 && Date.now() < deadline && (await new Promise((r) => setTimeout(r, 100)), true));
    const facts = found.memories.map((m) => m.content.parts[0].text);
    assert.ok(facts.includes("The user said: I grow tomatoes on my balcony."), `facts: ${facts}`);
    assert.ok(facts.includes("The user said: I cycle to work."), `facts: ${facts}`);
  });

  // ADK sends customMetadata as the generation's (or creation's) config:
  // typed metadata, with metadataMergeStrategy and displayName taken out
  // of it. Read back through the agent engines module.
  test("addEventsToMemory and addMemory with custom metadata: typed values, merge strategy, display name", async () => {
    const m = client.agentEnginesInternal.memories;
    const scope = { app_name: engineId, user_id: "dee" };
    const memoriesOf = async () => (await m.retrieveInternal({ name: engine, scope, simpleRetrievalParams: { pageSize: 100 } })).retrievedMemories ?? [];
    const jazz = "The user said: I like jazz.";
    const add = (customMetadata) =>
      memory.addEventsToMemory({
        appName: engineId,
        userId: "dee",
        customMetadata,
        events: [createEvent({ author: "user", content: { role: "user", parts: [{ text: "I like jazz." }] } })],
      });
    // ADK does not wait for the generation: read until it shows.
    const jazzMetadata = (want) =>
      eventually(async () => {
        const got = (await memoriesOf()).filter((r) => r.memory.fact === jazz);
        return got.length === 1 && isDeepStrictEqual(got[0].memory.metadata, want) ? got[0].memory : null;
      }, `the jazz memory with metadata ${JSON.stringify(want)}`);

    await add({ source: "chat", score: 2, vip: true });
    // The number stays a double, the boolean a boolean.
    const first = await jazzMetadata({ score: { doubleValue: 2 }, source: { stringValue: "chat" }, vip: { boolValue: true } });
    await add({ score: 3, lang: "en", metadataMergeStrategy: "MERGE" });
    const merged = await jazzMetadata({ lang: { stringValue: "en" }, score: { doubleValue: 3 }, source: { stringValue: "chat" }, vip: { boolValue: true } });
    assert.equal(merged.name, first.name);
    await add({ score: 4, metadataMergeStrategy: "OVERWRITE" });
    assert.equal((await jazzMetadata({ score: { doubleValue: 4 } })).name, first.name);

    // addMemory creates the memory with the display name and the rest as
    // typed metadata; with enable_consolidation it generates.
    await memory.addMemory({
      appName: engineId,
      userId: "dee",
      memories: [{ content: { parts: [{ text: "Dee's cat is called Miso." }] } }],
      customMetadata: { displayName: "cat", weight: 0.5, since: new Date("2026-01-02T03:04:05Z") },
    });
    await memory.addMemory({
      appName: engineId,
      userId: "dee",
      memories: [{ content: { parts: [{ text: "Dee bakes bread." }] } }],
      customMetadata: { enable_consolidation: true, metadata: { origin: "import" } },
    });
    const cat = await eventually(async () => (await memoriesOf()).find((r) => r.memory.fact === "Dee's cat is called Miso.")?.memory, "the cat memory");
    assert.equal(cat.displayName, "cat");
    assert.deepEqual(cat.metadata.weight, { doubleValue: 0.5 });
    assert.equal(Date.parse(cat.metadata.since.timestampValue), Date.parse("2026-01-02T03:04:05Z"));
    const bread = await eventually(async () => (await memoriesOf()).find((r) => r.memory.fact === "Dee bakes bread.")?.memory, "the bread memory");
    assert.deepEqual(bread.metadata, { origin: { stringValue: "import" } });

    // searchMemory finds them; a filter on their metadata selects.
    const found = await memory.searchMemory({ appName: engineId, userId: "dee", query: "jazz" });
    assert.ok(found.memories.some((e) => e.content.parts[0].text === jazz));
    const filtered = await m.retrieveInternal({ name: engine, scope, simpleRetrievalParams: { pageSize: 100 }, config: { filter: 'metadata.score = 4 OR metadata.origin = "import"' } });
    assert.deepEqual(filtered.retrievedMemories.map((r) => r.memory.fact).sort(), ["Dee bakes bread.", jazz]);
  });
});
