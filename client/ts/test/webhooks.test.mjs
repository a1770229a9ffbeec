// Webhooks against a real kioku serve: a receiver on loopback verifies
// every delivery with the standardwebhooks package (the Standard Webhooks
// reference implementation), gets every change of a generation run and
// of the calls after it, each webhook-id once after de-duplication though
// it fails every first attempt, and refuses a tampered body; a receiver
// answering 500 forever is dead-lettered with its attempts listed, and
// sent again with RedeliverWebhook.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, test } from "node:test";

import { Webhook } from "standardwebhooks";

import { WebhookDeliveryState, createKiokuClient, generateResult, waitOperation } from "../dist/index.js";
import { startKioku } from "./kioku.mjs";

let kioku;
let client;
before(async () => {
  kioku = await startKioku("--webhooks-allow-loopback-http", "--webhooks-retry-window", "3s", "--webhooks-max-retry-delay", "300ms");
  client = createKiokuClient({ baseUrl: kioku.url });
});
after(() => kioku?.stop());

/** Starts a receiver whose answer(req, body) gives each request's status. */
async function receiver(answer) {
  const seen = [];
  const server = createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const r = { headers: req.headers, body };
      seen.push(r);
      res.writeHead(answer(r));
      res.end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${server.address().port}/hook`, seen, close: () => server.close() };
}

async function until(what, ok, ms = 20_000) {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

const allEvents = ["memory.created", "memory.updated", "memory.deleted"];

test("every change of a generation run, signed, each webhook-id once", async () => {
  const failedOnce = new Set();
  // Every first attempt of a message fails: each comes at least twice.
  const rx = await receiver(({ headers }) => {
    const id = headers["webhook-id"];
    if (failedOnce.has(id)) {
      return 204;
    }
    failedOnce.add(id);
    return 503;
  });
  try {
    const cfg = await client.memories.updateMemoryBankConfig({
      memoryBankConfig: { name: "apps/hooks/memoryBankConfig", webhooks: [{ url: rx.url, events: allEvents }] },
      updateMask: { paths: ["webhooks"] },
    });
    const secret = cfg.webhooks[0].secret;
    assert.match(secret, /^whsec_[A-Za-z0-9+/]+=*$/);
    // Get never shows the secret again.
    const read = await client.memories.getMemoryBankConfig({ name: "apps/hooks/memoryBankConfig" });
    assert.equal(read.webhooks[0].secret, "");
    assert.equal(read.webhooks[0].url, rx.url);

    const scope = { user_id: "ann" };
    const op = await client.memories.generateMemories({
      parent: "apps/hooks",
      scope,
      source: {
        case: "directMemoriesSource",
        value: { memories: [{ fact: "Ann lives in Sapporo." }, { fact: "Ann prefers green tea." }, { fact: "Ann swims on Sundays." }] },
      },
    });
    const done = await waitOperation(client, op.name, { timeoutMs: 20_000 });
    const generated = generateResult(done).generatedMemories.map((g) => g.memory);
    assert.equal(generated.length, 3);
    await client.memories.updateMemory({ memory: { name: generated[0].name, fact: "Ann lives in Osaka." }, updateMask: { paths: ["fact"] } });
    await client.memories.deleteMemory({ name: generated[2].name });
    const want = [
      ...generated.map((m) => `memory.created ${m.name} 1`),
      `memory.updated ${generated[0].name} 2`,
      `memory.deleted ${generated[2].name} 2`,
    ].sort();

    const wh = new Webhook(secret);
    const unique = () => new Map(rx.seen.filter((r) => r.headers["webhook-signature"]).map((r) => [r.headers["webhook-id"], r]));
    await until("every delivery twice", () => unique().size === want.length && [...unique().keys()].every((id) => rx.seen.filter((r) => r.headers["webhook-id"] === id).length >= 2));
    const got = [];
    for (const r of rx.seen) {
      const ev = wh.verify(r.body, r.headers); // throws on a bad signature
      assert.equal(ev.data.scope.user_id, "ann");
      assert.ok(ev.data.fact);
    }
    for (const [id, r] of unique()) {
      const ev = JSON.parse(r.body);
      got.push(`${ev.type} ${ev.data.name} ${ev.data.revision}`);
      assert.match(id, /^msg_hooks_\d+$/);
    }
    assert.deepEqual(got.sort(), want);
    // Retries of a message carry the same id and body.
    const first = rx.seen[0];
    const again = rx.seen.filter((r) => r.headers["webhook-id"] === first.headers["webhook-id"]);
    assert.ok(again.length >= 2);
    assert.equal(again[1].body, first.body);
    // Per memory, in order: the update of the first memory after its creation.
    const order = rx.seen.map((r) => JSON.parse(r.body)).filter((e) => e.data.name === generated[0].name).map((e) => e.type);
    assert.ok(order.lastIndexOf("memory.created") < order.indexOf("memory.updated"), order.join(","));

    // A tampered body fails the package's verification.
    const tampered = first.body.replace("Ann", "Bob");
    assert.notEqual(tampered, first.body);
    assert.throws(() => wh.verify(tampered, first.headers), /signature/i);
    // So does another secret.
    assert.throws(() => new Webhook("whsec_" + Buffer.alloc(32, 7).toString("base64")).verify(first.body, first.headers));
  } finally {
    rx.close();
  }
});

test("a receiver answering 500 forever is dead-lettered, then redelivered", async () => {
  let status = 500;
  const rx = await receiver(() => status);
  try {
    await client.memories.updateMemoryBankConfig({
      memoryBankConfig: { name: "apps/dead/memoryBankConfig", webhooks: [{ url: rx.url, events: ["memory.created"], includeFact: false }] },
      updateMask: { paths: ["webhooks"] },
    });
    const m = await client.memories.createMemory({ parent: "apps/dead", memory: { fact: "Ann has a cat.", scope: { user_id: "ann" } } });
    let dead;
    await until("the dead letter", async () => {
      const page = await client.memories.listWebhookDeliveries({ parent: "apps/dead", state: WebhookDeliveryState.DEAD_LETTERED });
      dead = page.deliveries[0];
      return dead !== undefined;
    });
    assert.equal(dead.memory, m.name);
    assert.equal(dead.type, "memory.created");
    assert.ok(dead.attemptCount >= 2, `attempts ${dead.attemptCount}`);
    assert.equal(dead.attempts.length, Math.min(dead.attemptCount, 20)); // the last 20 are kept
    for (const a of dead.attempts) {
      assert.equal(a.statusCode, 500);
      assert.match(a.error, /500/);
    }
    // include_fact false: the memory's name only.
    assert.deepEqual(JSON.parse(rx.seen[0].body).data, { name: m.name });

    status = 204;
    const again = await client.memories.redeliverWebhook({ name: dead.name });
    assert.equal(again.state, WebhookDeliveryState.PENDING);
    await until("the redelivery", async () => {
      const page = await client.memories.listWebhookDeliveries({ parent: "apps/dead" });
      return page.deliveries[0].state === WebhookDeliveryState.DELIVERED;
    });
  } finally {
    rx.close();
  }
});
