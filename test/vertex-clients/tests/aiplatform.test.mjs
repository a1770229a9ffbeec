// Google's Node client of Vertex AI, @google-cloud/aiplatform (v1beta1
// SessionServiceClient and MemoryBankServiceClient), against kioku over
// gRPC and over its REST fallback (fallback: true), with no Google
// credentials: gRPC with plaintext channel credentials (no token is
// asked for), REST with Application Default Credentials from a fake
// metadata server on loopback.
import { escapes, startGemini, startKioku, startMetadata, engine, struct, plain } from "../lib/harness.mjs";

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import aiplatform from "@google-cloud/aiplatform";
import { grpc } from "google-gax";

const { SessionServiceClient, MemoryBankServiceClient } = aiplatform.v1beta1;

/** How to point the clients at kioku: over gRPC or over REST. */
const transports = {
  grpc: (k) => ({ apiEndpoint: k.host, port: k.port, sslCreds: grpc.credentials.createInsecure() }),
  rest: (k) => ({ apiEndpoint: k.host, port: k.port, fallback: true, protocol: "http" }),
};

const seconds = (t) => ({ seconds: Math.floor(t / 1000), nanos: (t % 1000) * 1e6 });

for (const [transport, options] of Object.entries(transports)) {
  describe(`@google-cloud/aiplatform over ${transport}`, () => {
    let gemini, metadata, kioku, sessions, memories;
    before(async () => {
      gemini = await startGemini();
      metadata = await startMetadata();
      kioku = await startKioku({ gemini });
      sessions = new SessionServiceClient(options(kioku));
      memories = new MemoryBankServiceClient(options(kioku));
    });
    after(async () => {
      await sessions?.close();
      await memories?.close();
      await kioku?.stop();
      gemini?.close();
      metadata?.close();
      assert.deepEqual(escapes, [], "connections beyond loopback");
      // gRPC with plaintext credentials asks for no token (google-gax
      // still reads the universe domain from Application Default
      // Credentials, which asks the metadata server for the project); REST
      // takes one from ADC: the fake metadata server.
      if (transport === "grpc") assert.equal(metadata.state.tokens, 0, "gRPC took a token from the metadata server");
      else assert.ok(metadata.state.tokens > 0, "REST took no token from the metadata server");
    });

    test("sessions: create (operation waited), get, list with a filter and pages, update with snake_case masks, append with a state delta, list events with a time filter, delete", async () => {
      const create = async (sessionId, userId, session = {}) => {
        const [op] = await sessions.createSession({ parent: engine, sessionId, session: { userId, ...session } });
        const [created] = await op.promise();
        return created;
      };
      const s1 = await create("s1", "ann", { displayName: "first chat", labels: { team: "core" }, sessionState: struct({ mood: "curious" }) });
      assert.equal(s1.name, `${engine}/sessions/s1`);
      assert.equal(s1.userId, "ann");
      await create("s2", "ann");
      await create("s3", "bob");
      await create("s4", "cy");

      const [got] = await sessions.getSession({ name: s1.name });
      assert.equal(got.displayName, "first chat");
      assert.deepEqual(plain(got.sessionState), { mood: "curious" });

      // A filter with OR, in pages of one.
      const ids = [];
      let pageToken = "";
      let pages = 0;
      do {
        const [page, , resp] = await sessions.listSessions(
          { parent: engine, filter: 'user_id="ann" OR userId="bob"', pageSize: 1, pageToken, orderBy: "create_time" },
          { autoPaginate: false },
        );
        assert.ok(page.length === 1, `page ${pages} holds ${page.length} sessions`);
        ids.push(...page.map((s) => s.name.split("/").pop()));
        pageToken = resp?.nextPageToken ?? "";
        pages++;
      } while (pageToken);
      assert.deepEqual(ids, ["s1", "s2", "s3"]);
      const [all] = await sessions.listSessions({ parent: engine, pageSize: 5000 }, { autoPaginate: false });
      assert.equal(all.length, 4, "a page size over 100 is coerced");

      // Update masks in snake_case, as written.
      const [updated] = await sessions.updateSession({
        session: { name: s1.name, displayName: "renamed", labels: { team: "edge" } },
        updateMask: { paths: ["display_name", "labels"] },
      });
      assert.equal(updated.displayName, "renamed");
      assert.equal(updated.labels.team, "edge");

      // Events with a state delta, at the caller's times.
      const t0 = Date.parse("2026-01-02T03:04:05Z");
      for (let i = 0; i < 3; i++) {
        await sessions.appendEvent({
          name: s1.name,
          event: {
            author: i % 2 ? "model" : "user",
            invocationId: `inv${i}`,
            timestamp: seconds(t0 + i * 1000),
            content: { role: i % 2 ? "model" : "user", parts: [{ text: `message ${i}` }] },
            actions: { stateDelta: struct({ turn: i, "user:name": "Ann" }) },
          },
        });
      }
      const [state] = await sessions.getSession({ name: s1.name });
      assert.deepEqual(plain(state.sessionState), { mood: "curious", turn: 2, "user:name": "Ann" });
      const [events] = await sessions.listEvents({ parent: s1.name, filter: 'timestamp>="2026-01-02T03:04:06Z"' });
      assert.deepEqual(events.map((e) => e.invocationId), ["inv1", "inv2"]);
      assert.deepEqual(plain(events[1].actions.stateDelta), { turn: 2, "user:name": "Ann" });

      // Delete, the operation waited; the session is gone.
      const [del] = await sessions.deleteSession({ name: `${engine}/sessions/s4` });
      await del.promise();
      await assert.rejects(sessions.getSession({ name: `${engine}/sessions/s4` }), (err) => err.code === 5);
    });

    test("memories: create with a display name, generate from a session (operation polled), retrieve by similarity and by scope, list, get, update of the display name, delete", async () => {
      const scope = { user_id: "dan" };
      const [cop] = await memories.createMemory({ parent: engine, memoryId: "tea", memory: { fact: "Dan prefers green tea.", scope, displayName: "tea", description: "a drink" } });
      const [tea] = await cop.promise();
      assert.equal(tea.name, `${engine}/memories/tea`);
      assert.equal(tea.fact, "Dan prefers green tea.");
      assert.equal(tea.displayName, "tea");
      assert.equal(tea.description, "a drink");

      const [sop] = await sessions.createSession({ parent: engine, sessionId: "chat", session: { userId: "dan" } });
      const [chat] = await sop.promise();
      await sessions.appendEvent({
        name: chat.name,
        event: { author: "user", invocationId: "i1", timestamp: seconds(Date.now()), content: { role: "user", parts: [{ text: "I have a dog called Rex." }] } },
      });
      const before = gemini.calls.extract;
      const [gop] = await memories.generateMemories({ parent: engine, vertexSessionSource: { session: chat.name }, scope });
      const [generated] = await gop.promise();
      assert.ok(gemini.calls.extract > before, "the model was called");
      assert.deepEqual(generated.generatedMemories.map((g) => g.memory.fact), ["The user said: I have a dog called Rex."]);
      const rex = generated.generatedMemories[0].memory;

      const [similar] = await memories.retrieveMemories({ parent: engine, scope, similaritySearchParams: { searchQuery: "dog", topK: 1 } });
      assert.deepEqual(similar.retrievedMemories.map((r) => r.memory.name), [rex.name]);
      const [byScope] = await memories.retrieveMemories({ parent: engine, scope, simpleRetrievalParams: { pageSize: 10 } });
      assert.equal(byScope.retrievedMemories.length, 2);

      const [listed] = await memories.listMemories({ parent: engine, filter: 'scope.user_id="dan"' });
      assert.deepEqual(listed.map((m) => m.fact).sort(), ["Dan prefers green tea.", "The user said: I have a dog called Rex."]);
      const [got] = await memories.getMemory({ name: tea.name });
      assert.equal(got.fact, "Dan prefers green tea.");
      assert.equal(got.displayName, "tea");

      const expireTime = { seconds: Math.floor(Date.parse("2099-01-01T00:00:00Z") / 1000), nanos: 0 };
      const [uop] = await memories.updateMemory({
        memory: { name: tea.name, fact: "Dan prefers jasmine tea.", expireTime, displayName: "jasmine" },
        updateMask: { paths: ["fact", "expire_time", "display_name"] },
      });
      const [updated] = await uop.promise();
      assert.equal(updated.fact, "Dan prefers jasmine tea.");
      assert.equal(updated.displayName, "jasmine");
      assert.equal(updated.description, "a drink");
      assert.equal(Number(updated.expireTime.seconds), expireTime.seconds);

      const [dop] = await memories.deleteMemory({ name: tea.name });
      await dop.promise();
      await assert.rejects(memories.getMemory({ name: tea.name }), (err) => err.code === 5);
    });
  });
}
