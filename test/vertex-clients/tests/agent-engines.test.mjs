// The agent engines module of @google-cloud/vertexai (the TypeScript port of
// the Vertex AI SDK's agent_engines, which ADK for TypeScript uses) against
// kioku over REST. Its Client always loads Application Default
// Credentials: they come from a fake metadata server on loopback, whose
// token is any string for a kioku without keys, and a kioku API key for a
// kioku with --auth-keys.
import { escapes, eventually, newKey, startGemini, startKioku, startKiokuMetadata, startMetadata, engine, engineId, location, project } from "../lib/harness.mjs";

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

// A memory's names, sorted, for comparing selections.
const names = (list) => (list ?? []).map((x) => (x.memory ?? x).name.split("/").pop()).sort();

describe("@google-cloud/vertexai agent engines: memory metadata and filters", () => {
  let gemini, metadata, kioku, m;
  before(async () => {
    gemini = await startGemini();
    metadata = await startMetadata();
    kioku = await startKioku({ gemini });
    m = new Client({ project, location, apiEndpoint: kioku.url })._agentEnginesInternal.memories;
  });
  after(async () => {
    await kioku?.stop();
    gemini?.close();
    metadata?.close();
    assert.deepEqual(escapes, [], "connections beyond loopback");
  });
  const scope = { user_id: "eve" };
  const seen = "2026-01-02T03:04:05Z";
  const generate = async (fact, config) => {
    const op = await m.generateInternal({ name: engine, scope, directMemoriesSource: { directMemories: [{ fact }] }, config });
    const { response } = await done(op, (p) => m.getGenerateMemoriesOperationInternal(p));
    assert.equal(response.generatedMemories.length, 1, JSON.stringify(response));
    return response.generatedMemories[0];
  };

  test("a display name, a description and typed metadata are kept; a rollback answers them", async () => {
    const op = await m.createInternal({
      name: engine,
      fact: "Eve plays chess.",
      scope,
      config: {
        memoryId: "chess",
        displayName: "chess",
        description: "a hobby",
        topics: [{ customMemoryTopicLabel: "HOBBIES" }],
        metadata: { source: { stringValue: "form" }, score: { doubleValue: 2 }, vip: { boolValue: true }, seen: { timestampValue: seen } },
      },
    });
    const created = (await done(op, (p) => m.getMemoryOperationInternal(p))).response;
    const name = `${engine}/memories/chess`;
    for (const got of [created, await m.get({ name })]) {
      assert.equal(got.displayName, "chess");
      assert.equal(got.description, "a hobby");
      // Each value keeps its type: the double is a number, not "2".
      const { seen: at, ...rest } = got.metadata;
      assert.deepEqual(rest, { source: { stringValue: "form" }, score: { doubleValue: 2 }, vip: { boolValue: true } });
      assert.equal(Date.parse(at.timestampValue), Date.parse(seen));
    }

    // The metadata changed, then rolled back: the rollback's answer has
    // the topics and the typed metadata of revision 1.
    await done(await m.updateInternal({ name, config: { updateMask: "metadata", metadata: { score: { doubleValue: 9 } } } }), (p) => m.getMemoryOperationInternal(p));
    assert.deepEqual((await m.get({ name })).metadata, { score: { doubleValue: 9 } });
    const back = await m.rollbackInternal({ name, targetRevisionId: "1" });
    assert.ok(back.done);
    assert.deepEqual(back.response.topics, [{ customMemoryTopicLabel: "HOBBIES" }]);
    assert.deepEqual(back.response.metadata.score, { doubleValue: 2 });
    assert.equal((await m.get({ name })).displayName, "chess");
  });

  test("generation metadata: created memories take it; OVERWRITE, MERGE and REQUIRE_EXACT_MATCH on update", async () => {
    const first = await generate("Eve lives in Oslo.", { metadata: { source: { stringValue: "import" }, score: { doubleValue: 1 } } });
    assert.equal(first.action, "CREATED");
    assert.deepEqual(first.memory.metadata, { source: { stringValue: "import" }, score: { doubleValue: 1 } });
    const oslo = first.memory.name;

    // The same fact again: the fake model updates that memory.
    const merged = await generate("Eve lives in Oslo.", { metadata: { score: { doubleValue: 3 }, lang: { stringValue: "no" } }, metadataMergeStrategy: "MERGE" });
    assert.equal(merged.action, "UPDATED");
    assert.equal(merged.memory.name, oslo);
    assert.deepEqual(merged.memory.metadata, { source: { stringValue: "import" }, score: { doubleValue: 3 }, lang: { stringValue: "no" } });

    const overwritten = await generate("Eve lives in Oslo.", { metadata: { score: { doubleValue: 4 } }, metadataMergeStrategy: "OVERWRITE" });
    assert.equal(overwritten.memory.name, oslo);
    assert.deepEqual(overwritten.memory.metadata, { score: { doubleValue: 4 } });
    // Without a strategy, as Vertex AI documents: OVERWRITE.
    const unspecified = await generate("Eve lives in Oslo.", { metadata: { score: { doubleValue: 4 } } });
    assert.equal(unspecified.memory.name, oslo);
    assert.deepEqual((await m.get({ name: oslo })).metadata, { score: { doubleValue: 4 } });

    // REQUIRE_EXACT_MATCH: the memory with other metadata is not
    // consolidated with (a new memory), the one with the same is.
    const apart = await generate("Eve lives in Oslo.", { metadata: { score: { doubleValue: 5 } }, metadataMergeStrategy: "REQUIRE_EXACT_MATCH" });
    assert.equal(apart.action, "CREATED");
    assert.notEqual(apart.memory.name, oslo);
    const same = await generate("Eve lives in Oslo.", { metadata: { score: { doubleValue: 4 } }, metadataMergeStrategy: "REQUIRE_EXACT_MATCH" });
    assert.equal(same.action, "UPDATED");
    assert.equal(same.memory.name, oslo);

    await assert.rejects(generate("Eve skis.", { metadataMergeStrategy: "APPEND" }), /metadata_merge_strategy/);
  });

  test("RetrieveMemories filter (AIP-160 with OR, on metadata, topics and facts) and filterGroups; ListMemories filters on metadata", async () => {
    // Memories of eve now: chess {source, score 2, vip, seen; HOBBIES},
    // Oslo with score 4 and Oslo with score 5.
    const all = await m.retrieveInternal({ name: engine, scope, simpleRetrievalParams: { pageSize: 100 } });
    assert.equal(all.retrievedMemories.length, 3);
    const oslo4 = all.retrievedMemories.find((r) => r.memory.metadata?.score?.doubleValue === 4).memory.name.split("/").pop();
    const oslo5 = all.retrievedMemories.find((r) => r.memory.metadata?.score?.doubleValue === 5).memory.name.split("/").pop();
    const retrieve = (config, params = { simpleRetrievalParams: { pageSize: 100 } }) => m.retrieveInternal({ name: engine, scope, ...params, config });

    let got = await retrieve({ filter: 'topics.custom_memory_topic_label="HOBBIES" OR metadata.score >= 5' });
    assert.deepEqual(names(got.retrievedMemories), ["chess", oslo5].sort());
    got = await retrieve({ filter: 'fact="Eve plays chess." OR (metadata.score > 3.5 AND NOT metadata.score = 5)' });
    assert.deepEqual(names(got.retrievedMemories), ["chess", oslo4].sort());
    // Metadata compares as its type: a double numerically, a timestamp
    // as a time.
    got = await retrieve({ filter: `metadata.score < 10 AND metadata.seen > "2026-01-01T00:00:00Z"` });
    assert.deepEqual(names(got.retrievedMemories), ["chess"]);
    // filterGroups: an OR of ANDs of metadata comparisons.
    got = await retrieve({
      filterGroups: [
        { filters: [{ key: "score", op: "GREATER_THAN", value: { doubleValue: 3 } }, { key: "score", op: "LESS_THAN", value: { doubleValue: 4.5 } }] },
        { filters: [{ key: "vip", value: { boolValue: true } }] },
      ],
    });
    assert.deepEqual(names(got.retrievedMemories), ["chess", oslo4].sort());
    // With a similarity search too.
    got = await retrieve({ filter: "metadata.score = 5" }, { similaritySearchParams: { searchQuery: "Where does Eve live?", topK: 5 } });
    assert.deepEqual(names(got.retrievedMemories), [oslo5]);
    // A filter that does not parse is refused, naming the field.
    await assert.rejects(retrieve({ filter: "metadata.score >> 1" }), /400|INVALID_ARGUMENT/);

    const listed = await m.listInternal({ name: engine, config: { filter: 'scope.user_id="eve" AND (metadata.vip = true OR metadata.score = 4)' } });
    assert.deepEqual(names(listed.memories), ["chess", oslo4].sort());
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

// kioku's own helper for clients that insist on ADC: kioku metadata-server,
// handing out a kioku API key, is all the Client needs (no Google project,
// no credentials, no fake of the test's own).
describe("@google-cloud/vertexai agent engines with kioku metadata-server", () => {
  let helper, kioku, key;
  before(async () => {
    let entry;
    [key, entry] = newKey("helper", engineId);
    helper = await startKiokuMetadata({ token: key });
    kioku = await startKioku({ keys: [entry] });
  });
  after(async () => {
    await kioku?.stop();
    await helper?.stop();
    assert.deepEqual(escapes, [], "connections beyond loopback");
  });

  // kioku requires a key here: the Client's calls get through only with
  // the helper's token.
  test("the Client takes the helper's token (a kioku key) and reaches kioku", async () => {
    const ae = new Client({ project, location, apiEndpoint: kioku.url })._agentEnginesInternal;
    const op = await ae.sessions.createInternal({ name: engine, userId: "ann", config: { sessionId: "via-helper" } });
    assert.ok(op.name, "the create operation");
    assert.equal((await ae.sessions.get({ name: `${engine}/sessions/via-helper` })).userId, "ann");
  });
});
