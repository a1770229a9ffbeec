// The TypeScript client against a real kioku serve: sessions with every
// state scope, idempotent appends, WatchSession, memories with
// waitOperation and retrieval, gRPC-Web, and JSON without bigint surprises.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  Code,
  ConnectError,
  OperationSchema,
  SessionSchema,
  create,
  createKiokuClient,
  generateResult,
  memoryName,
  MemoryAction,
  purgeResult,
  sessionName,
  toJson,
  userName,
  waitOperation,
} from "../dist/index.js";
import { startKioku } from "./kioku.mjs";

let kioku;
let client;
before(async () => {
  kioku = await startKioku();
  client = createKiokuClient({ baseUrl: kioku.url });
});
after(() => kioku?.stop());

const text = (role, t) => ({ role, parts: [{ text: t }] });

describe("sessions", () => {
  test("a round trip with every state scope", async () => {
    const s = await client.sessions.createSession({
      parent: userName("demo", "ann"),
      sessionId: "scopes",
      session: { displayName: "first chat", state: { mood: "curious" } },
    });
    assert.equal(s.name, sessionName("demo", "ann", "scopes"));

    const { event } = await client.sessions.appendEvent({
      name: s.name,
      event: {
        id: "e1",
        author: "user",
        content: text("user", "I prefer tea."),
        actions: { stateDelta: { topic: "tea", "user:drink": "tea", "app:greeting": "hello", "temp:draft": 1 } },
      },
      expectedSequence: 0n,
    });
    assert.equal(event.sequence, 1n);
    assert.equal(event.actions.stateDelta["temp:draft"], undefined, "temp: keys are stripped from the stored event");

    const got = await client.sessions.getSession({ name: s.name, numRecentEvents: 10 });
    assert.deepEqual(got.state, { mood: "curious", topic: "tea", "user:drink": "tea", "app:greeting": "hello" });
    assert.equal(got.events.length, 1);
    assert.equal(got.events[0].content.parts[0].text, "I prefer tea.");

    // A second session of the same user sees user: and app:, not the first
    // session's own keys; another user sees only app:.
    const s2 = await client.sessions.createSession({ parent: userName("demo", "ann") });
    assert.deepEqual(s2.state, { "user:drink": "tea", "app:greeting": "hello" });
    const other = await client.sessions.createSession({ parent: userName("demo", "bob") });
    assert.deepEqual(other.state, { "app:greeting": "hello" });

    // user: and app: state without a session; null deletes.
    await client.sessions.updateState({ name: "apps/demo/users/ann/state", stateDelta: { "user:drink": null, "user:nickname": "Annie" } });
    const userState = await client.sessions.getState({ name: "apps/demo/users/ann/state" });
    assert.deepEqual(userState.state, { "user:nickname": "Annie" });
    const appState = await client.sessions.getState({ name: "apps/demo/state" });
    assert.deepEqual(appState.state, { "app:greeting": "hello" });

    // Listing, with the JSON of a session safe for JSON.stringify.
    const list = await client.sessions.listSessions({ parent: userName("demo", "ann") });
    assert.equal(list.sessions.length, 2);
    assert.throws(() => JSON.stringify(got), TypeError, "a message with an int64 is not JSON by itself");
    const plain = JSON.parse(JSON.stringify(toJson(SessionSchema, got)));
    assert.equal(plain.events[0].sequence, "1");
    assert.equal(plain.lastSequence, "1");
    assert.equal(plain.displayName, "first chat");
  });

  test("appends are idempotent by event id", async () => {
    const s = await client.sessions.createSession({ parent: userName("demo", "ann"), sessionId: "retry" });
    const append = () =>
      client.sessions.appendEvent({
        name: s.name,
        event: { id: "once", author: "user", actions: { stateDelta: { "user:visits": 1 } } },
      });
    const first = await append();
    const retry = await append();
    assert.equal(retry.event.sequence, first.event.sequence);
    const got = await client.sessions.getSession({ name: s.name });
    assert.equal(got.events.length, 1, "the retry stored nothing");
    assert.equal(got.lastSequence, 1n);

    // The same id with other content is refused.
    await assert.rejects(
      client.sessions.appendEvent({ name: s.name, event: { id: "once", author: "agent" } }),
      (err) => err instanceof ConnectError && err.code === Code.AlreadyExists,
    );
    // A stale expected sequence writes nothing.
    await assert.rejects(
      client.sessions.appendEvent({ name: s.name, event: { author: "user" }, expectedSequence: 0n }),
      (err) => err instanceof ConnectError && err.code === Code.FailedPrecondition,
    );
  });

  test("WatchSession streams appended events", async () => {
    const s = await client.sessions.createSession({ parent: userName("demo", "ann"), sessionId: "watched" });
    await client.sessions.appendEvent({ name: s.name, event: { id: "before", author: "user" } });
    const abort = new AbortController();
    const seen = [];
    // Replays what follows sequence 0, then streams new events.
    const watching = (async () => {
      for await (const res of client.sessions.watchSession({ name: s.name, afterSequence: 0n }, { signal: abort.signal })) {
        seen.push(res.event.id);
        if (seen.length === 3) {
          return;
        }
      }
    })();
    await client.sessions.appendEvent({ name: s.name, event: { id: "during-1", author: "agent" } });
    await client.sessions.appendEvent({ name: s.name, event: { id: "during-2", author: "user" } });
    const timer = setTimeout(() => abort.abort(), 10_000);
    await watching;
    clearTimeout(timer);
    assert.deepEqual(seen, ["before", "during-1", "during-2"]);

    // Deleting the session ends a watch.
    const ended = (async () => {
      const ids = [];
      for await (const res of client.sessions.watchSession({ name: s.name })) {
        ids.push(res.event.id);
      }
      return ids;
    })();
    await new Promise((r) => setTimeout(r, 200));
    await client.sessions.deleteSession({ name: s.name });
    assert.deepEqual(await ended, []);
  });

  test("errors are ConnectErrors with the server's code", async () => {
    await assert.rejects(
      client.sessions.getSession({ name: sessionName("demo", "ann", "missing") }),
      (err) => err instanceof ConnectError && err.code === Code.NotFound && /not found/.test(err.rawMessage),
    );
    await assert.rejects(
      client.sessions.listSessions({ parent: userName("demo", "ann"), pageSize: -1 }),
      (err) => err.code === Code.InvalidArgument && /page_size/.test(err.rawMessage),
    );
  });
});

describe("memories", () => {
  test("direct memories, waitOperation and retrieval", async () => {
    const scope = { user_id: "ann" };
    const op = await client.memories.generateMemories({
      parent: "apps/demo",
      scope,
      source: {
        case: "directMemoriesSource",
        value: { memories: [{ fact: "Ann lives in Sapporo." }, { fact: "Ann prefers green tea." }] },
      },
    });
    assert.match(op.name, /^apps\/demo\/operations\//);
    const done = await waitOperation(client, op.name, { timeoutMs: 20_000 });
    assert.equal(done.done, true);
    const result = generateResult(done);
    assert.deepEqual(
      result.generatedMemories.map((g) => [g.memory.fact, g.action]),
      [
        ["Ann lives in Sapporo.", MemoryAction.CREATED],
        ["Ann prefers green tea.", MemoryAction.CREATED],
      ],
    );
    // The operation's JSON carries its typed response.
    const json = toJson(OperationSchema, done);
    assert.equal(json.response["@type"], "type.googleapis.com/kioku.v1.GenerateMemoriesResponse");

    const found = await client.memories.retrieveMemories({
      parent: "apps/demo",
      scope,
      method: { case: "similaritySearch", value: { query: "Where does Ann live?", topK: 1 } },
    });
    assert.equal(found.retrievedMemories.length, 1);
    assert.equal(found.retrievedMemories[0].memory.fact, "Ann lives in Sapporo.");

    // A memory created directly, with a display name and typed metadata
    // (also shown as text in metadata), read by name; a dry-run purge
    // counts the scope.
    const m = await client.memories.createMemory({
      parent: "apps/demo",
      memoryId: "tea",
      memory: { fact: "Ann drinks tea at noon.", scope, displayName: "tea", typedMetadata: { cups: { value: { case: "doubleValue", value: 2 } } } },
    });
    assert.equal(m.name, memoryName("demo", "tea"));
    const read = await client.memories.getMemory({ name: m.name });
    assert.equal(read.displayName, "tea");
    assert.deepEqual(read.typedMetadata.cups.value, { case: "doubleValue", value: 2 });
    assert.equal(read.metadata.cups, "2");
    const purge = await client.memories.purgeMemories({ parent: "apps/demo", scope });
    assert.equal(purgeResult(await waitOperation(client, purge.name)).purgeCount, 3n);
  });

  test("generateResult throws a failed operation's error", () => {
    const failed = create(OperationSchema, { name: "apps/demo/operations/x", done: true, result: { case: "error", value: { code: Code.FailedPrecondition, message: "no model" } } });
    assert.throws(() => generateResult(failed), (err) => err instanceof ConnectError && err.code === Code.FailedPrecondition && err.rawMessage === "no model");
    assert.throws(() => generateResult(create(OperationSchema, { name: "apps/demo/operations/y" })), (err) => err.code === Code.FailedPrecondition && /not done/.test(err.rawMessage));
  });

  test("generating from a session needs a model", async () => {
    // The offline extractor is the default model: this server runs none.
    const bare = await startKioku("--model-provider", "none");
    try {
      const c = createKiokuClient({ baseUrl: bare.url });
      const s = await c.sessions.createSession({ parent: userName("demo", "carol") });
      await c.sessions.appendEvent({ name: s.name, event: { author: "user", content: text("user", "I moved to Kyoto.") } });
      await assert.rejects(
        c.memories.generateMemories({ parent: "apps/demo", source: { case: "sessionSource", value: { session: s.name } } }),
        (err) => err instanceof ConnectError && err.code === Code.FailedPrecondition,
      );
    } finally {
      await bare.stop();
    }
  });

  test("waitOperation of an unknown operation is NotFound", async () => {
    await assert.rejects(
      waitOperation(client, "apps/demo/operations/none", { timeoutMs: 500 }),
      (err) => err instanceof ConnectError && err.code === Code.NotFound,
    );
  });

  test("waitOperation gives up after timeoutMs", async () => {
    // A server whose operation never finishes: each wait returns it undone
    // after the time asked for.
    const asked = [];
    const stuck = {
      operations: {
        async waitOperation(req) {
          const ms = Number(req.timeout.seconds) * 1000 + req.timeout.nanos / 1e6;
          asked.push(ms);
          await new Promise((r) => setTimeout(r, ms));
          return create(OperationSchema, { name: req.name, done: false });
        },
      },
    };
    await assert.rejects(
      waitOperation(stuck, "apps/demo/operations/slow", { timeoutMs: 300 }),
      (err) => err instanceof ConnectError && err.code === Code.DeadlineExceeded && /not done after 300 ms/.test(err.rawMessage),
    );
    assert.ok(asked.length >= 1 && asked[0] <= 300 && asked.every((ms) => ms >= 0), `waits asked: ${asked}`);
  });
});

describe("transports", () => {
  test("gRPC-Web and Connect binary reach the same data", async () => {
    for (const options of [{ transport: "grpc-web" }, { binary: true }]) {
      const c = createKiokuClient({ baseUrl: kioku.url, ...options });
      const got = await c.sessions.getSession({ name: sessionName("demo", "ann", "scopes") });
      assert.equal(got.state.mood, "curious", JSON.stringify(options));
      assert.equal(got.lastSequence, 1n);
    }
  });
});
