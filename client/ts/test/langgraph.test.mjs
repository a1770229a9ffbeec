// LangGraph.js (@langchain/langgraph, a real StateGraph compiled with the
// store, and LangChain's ChatOpenAI over HTTP against a fake model) with
// KiokuStore on a real kioku behind API keys: a graph that remembers in
// one run and answers from the memory in the next, then the store's
// operations one by one, the memories kioku made found by the graph, and
// another user's key refused.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { ChatOpenAI } from "@langchain/openai";
import { MessagesAnnotation, StateGraph } from "@langchain/langgraph";

import { Code, ConnectError, appName, createKiokuClient, generateResult, userName, waitOperation } from "../dist/index.js";
import { KiokuStore } from "../dist/langgraph.js";
import { startFakeModel } from "./fakemodel.mjs";
import { keyFile, makeKey, startKioku } from "./kioku.mjs";

let kioku;
let model;
const app = makeKey("demo");
const ann = makeKey("demo", "ann");
const bob = makeKey("demo", "bob");
before(async () => {
  kioku = await startKioku("--auth-keys", keyFile(app.entry, ann.entry, bob.entry));
  // The fake answers from the memories the graph put in its prompt.
  model = await startFakeModel((body) => {
    const system = body.messages?.find((m) => m.role === "system")?.content ?? "";
    return system.includes("green tea") ? "Ann drinks green tea." : "I do not know.";
  });
});
after(async () => {
  await kioku?.stop();
  await model?.close();
});

/** A graph that stores "Remember: ..." messages and answers others from the store's memories. */
function graph(store) {
  const llm = new ChatOpenAI({ model: "gpt-test", apiKey: "fake", configuration: { baseURL: model.baseURL }, maxRetries: 0 });
  return new StateGraph(MessagesAnnotation)
    .addNode("agent", async (state, config) => {
      const namespace = ["user_id", config.configurable.user_id];
      const said = String(state.messages.at(-1).content);
      if (said.startsWith("Remember: ")) {
        await config.store.put(namespace, "drink", { text: said.slice("Remember: ".length), source: "chat" });
        return { messages: [{ role: "assistant", content: "Noted." }] };
      }
      const memories = await config.store.search(namespace, { query: said, limit: 3 });
      const system = `What you know of the user:\n${memories.map((m) => `- ${m.value.text ?? m.value.fact}`).join("\n")}`;
      return { messages: [await llm.invoke([{ role: "system", content: system }, ...state.messages])] };
    })
    .addEdge("__start__", "agent")
    .compile({ store });
}

test("a graph remembers in one run and answers from kioku's memory in the next", async () => {
  const store = new KiokuStore({ client: createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key }), app: "demo", fields: ["text"] });
  const g = graph(store);
  const config = { configurable: { user_id: "ann" } };

  const first = await g.invoke({ messages: [{ role: "user", content: "Remember: Ann drinks green tea every morning." }] }, config);
  assert.equal(first.messages.at(-1).content, "Noted.");
  const second = await g.invoke({ messages: [{ role: "user", content: "What does Ann drink in the morning?" }] }, config);
  assert.equal(second.messages.at(-1).content, "Ann drinks green tea.");
  const request = model.requests.at(-1);
  assert.equal(request.path, "/v1/chat/completions");
  assert.match(request.body.messages[0].content, /- Ann drinks green tea every morning\./);

  // The item is a kioku memory of ann's scope, its fact the indexed text.
  const c = createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key });
  const res = await c.memories.retrieveMemories({ parent: appName("demo"), scope: { user_id: "ann" } });
  assert.deepEqual(
    res.retrievedMemories.map((r) => [r.memory.fact, r.memory.metadata.langgraph_key, JSON.parse(r.memory.description)]),
    [["Ann drinks green tea every morning.", "drink", { text: "Ann drinks green tea every morning.", source: "chat" }]],
  );
});

test("get, put, search with a filter, delete, listNamespaces", async () => {
  const store = new KiokuStore({ client: createKiokuClient({ baseUrl: kioku.url, apiKey: app.key }), app: "demo", fields: ["text"] });
  const ns = ["user_id", "carl", "topic", "food"];
  assert.equal(await store.get(ns, "k1"), null);
  await store.put(ns, "k1", { text: "Carl likes ramen.", stars: 5 });
  await store.put(ns, "k2", { text: "Carl dislikes olives.", stars: 1 });
  // The same key in another namespace is another item.
  await store.put(["user_id", "carl"], "k1", { text: "Carl lives in Osaka." });

  const got = await store.get(ns, "k1");
  assert.deepEqual([got.namespace, got.key, got.value], [ns, "k1", { text: "Carl likes ramen.", stars: 5 }]);
  assert.ok(got.createdAt instanceof Date && got.createdAt <= got.updatedAt);
  // Pairs in another order name the same scope, hence the same item.
  assert.deepEqual((await store.get(["topic", "food", "user_id", "carl"], "k1")).value, got.value);

  const ramen = await store.search(ns, { query: "which ramen does Carl like" });
  assert.equal(ramen[0].key, "k1");
  assert.ok(ramen[0].score > 0 && ramen[0].score <= 1, `score ${ramen[0].score}`);
  assert.deepEqual((await store.search(ns, { filter: { stars: { $lt: 3 } } })).map((i) => i.key), ["k2"]);
  assert.deepEqual((await store.search(ns, { filter: { stars: 5 } })).map((i) => i.key), ["k1"]);
  assert.deepEqual((await store.search(ns, { limit: 1, offset: 1 })).length, 1);
  assert.deepEqual((await store.search(["user_id", "carl"])).map((i) => i.value.text), ["Carl lives in Osaka."]);

  await store.put(ns, "k1", { text: "Carl likes udon now.", stars: 4 });
  assert.deepEqual((await store.get(ns, "k1")).value, { text: "Carl likes udon now.", stars: 4 });
  await store.delete(ns, "k1");
  assert.equal(await store.get(ns, "k1"), null);
  await store.delete(ns, "k1");
  // A put after a delete brings the item back under the same memory.
  await store.put(ns, "k1", { text: "Carl likes soba.", stars: 3 });
  assert.deepEqual((await store.get(ns, "k1")).value, { text: "Carl likes soba.", stars: 3 });

  assert.deepEqual(await store.listNamespaces({ prefix: ["user_id", "carl"] }), [
    ["user_id", "carl"],
    ["user_id", "carl", "topic", "food"],
  ]);
  assert.deepEqual(await store.listNamespaces({ suffix: ["user_id", "*"], maxDepth: 2 }), [["user_id", "ann"], ["user_id", "carl"]]);

  await assert.rejects(store.put(["memories"], "x", { text: "odd" }), /has 1 labels; kioku reads a namespace as key\/value pairs/);
  await assert.rejects(store.search(["user_id", "carl", "topic"]), /has 3 labels/);
});

test("the graph finds memories kioku generated from facts", async () => {
  const c = createKiokuClient({ baseUrl: kioku.url, apiKey: app.key });
  const op = await c.memories.generateMemories({
    parent: appName("demo"),
    scope: { user_id: "dora" },
    source: { case: "directMemoriesSource", value: { memories: [{ fact: "Dora plays the cello." }] } },
  });
  assert.equal(generateResult(await waitOperation(c, op.name)).generatedMemories.length, 1);
  const store = new KiokuStore({ client: c, app: "demo" });
  const found = await store.search(["user_id", "dora"], { query: "which instrument does Dora play" });
  assert.deepEqual(found.map((i) => i.value), [{ fact: "Dora plays the cello." }]);
  assert.match(found[0].key, /^[a-z0-9]+$/);
});

test("another user's key reaches nothing of ann's memories", async () => {
  const store = new KiokuStore({ client: createKiokuClient({ baseUrl: kioku.url, apiKey: bob.key }), app: "demo" });
  const denied = (e) => e instanceof ConnectError && e.code === Code.PermissionDenied;
  await assert.rejects(store.search(["user_id", "ann"], { query: "drink" }), denied);
  await assert.rejects(store.put(["user_id", "ann"], "drink", { text: "Ann drinks coffee." }), denied);
  await assert.rejects(store.listNamespaces(), denied);
  // A memory named by id that is not the caller's reads as absent.
  assert.equal(await store.get(["user_id", "ann"], "drink"), null);
  await store.delete(["user_id", "ann"], "drink");
  const annStore = new KiokuStore({ client: createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key }), app: "demo" });
  assert.equal((await annStore.get(["user_id", "ann"], "drink")).value.text, "Ann drinks green tea every morning.");
  // Bob's own namespace works.
  await store.put(["user_id", "bob"], "pet", { text: "Bob has a cat." });
  assert.equal((await store.search(["user_id", "bob"])).length, 1);
});
