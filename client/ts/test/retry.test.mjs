// The TypeScript client's retries against a real kioku serve, with faults
// put in at the HTTP level: an append the server stored but answered with a
// code of unknown outcome is sent again with the same event id and stored
// once; INTERNAL and calls unsafe to repeat are not retried.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { Code, ConnectError, createKiokuClient, newEventId, sessionName, userName } from "../dist/index.js";
import { startKioku } from "./kioku.mjs";

let kioku;
before(async () => {
  kioku = await startKioku();
});
after(() => kioku?.stop());

const wire = { [Code.Unavailable]: ["unavailable", 503], [Code.Aborted]: ["aborted", 409], [Code.Internal]: ["internal", 500] };

/**
 * A fetch that sends every request to the server and answers the first
 * `failures` calls of a procedure with `code` instead of the server's
 * answer (after the server handled them); it counts the calls.
 */
function faulty(procedure, code, failures = 1) {
  const calls = [];
  const f = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const res = await fetch(input, init);
    if (!url.endsWith(`/${procedure}`)) {
      return res;
    }
    calls.push(new TextDecoder().decode(init?.body));
    if (calls.length > failures) {
      return res;
    }
    await res.arrayBuffer();
    const [name, status] = wire[code];
    return new Response(JSON.stringify({ code: name, message: "the write was not confirmed" }), {
      status,
      headers: { "Content-Type": "application/json" },
    });
  };
  return { fetch: f, calls };
}

const fast = { initialBackoffMs: 1, maxBackoffMs: 5 };

describe("retries", () => {
  for (const [code, attempts] of [
    [Code.Unavailable, 2],
    [Code.Aborted, 2],
    [Code.Internal, 1],
  ]) {
    test(`a stored append answered ${Code[code]}: ${attempts} attempt(s), stored once`, async () => {
      const f = faulty("kioku.v1.SessionService/AppendEvent", code);
      const c = createKiokuClient({ baseUrl: kioku.url, fetch: f.fetch, retry: fast });
      const id = `r-${Code[code]}`;
      const s = await c.sessions.createSession({ parent: userName("retry", "ann"), sessionId: id });
      const call = c.sessions.appendEvent({ name: s.name, event: { author: "user", content: { role: "user", parts: [{ text: "tea" }] } } });
      if (attempts === 1) {
        await assert.rejects(call, (e) => e instanceof ConnectError && e.code === code);
      } else {
        const { event } = await call;
        assert.equal(event.sequence, 1n);
        assert.match(event.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      }
      assert.equal(f.calls.length, attempts);
      if (attempts > 1) {
        assert.equal(f.calls[0], f.calls[1], "the retry sends the same request, event id included");
      }
      const { events } = await c.sessions.listEvents({ parent: sessionName("retry", "ann", id) });
      assert.equal(events.length, 1, "the event is stored once");
    });
  }

  test("reads are retried; the attempts are bounded; retry: false turns them off", async () => {
    const name = sessionName("retry", "bob", "s");
    await createKiokuClient({ baseUrl: kioku.url }).sessions.createSession({ parent: userName("retry", "bob"), sessionId: "s" });
    let f = faulty("kioku.v1.SessionService/GetSession", Code.Unavailable, 2);
    assert.equal((await createKiokuClient({ baseUrl: kioku.url, fetch: f.fetch, retry: fast }).sessions.getSession({ name })).name, name);
    assert.equal(f.calls.length, 3);
    f = faulty("kioku.v1.SessionService/GetSession", Code.Unavailable, 10);
    await assert.rejects(createKiokuClient({ baseUrl: kioku.url, fetch: f.fetch, retry: { ...fast, maxAttempts: 3 } }).sessions.getSession({ name }), (e) => e.code === Code.Unavailable);
    assert.equal(f.calls.length, 3);
    f = faulty("kioku.v1.SessionService/GetSession", Code.Unavailable);
    await assert.rejects(createKiokuClient({ baseUrl: kioku.url, fetch: f.fetch, retry: false }).sessions.getSession({ name }), (e) => e.code === Code.Unavailable);
    assert.equal(f.calls.length, 1);
  });

  test("a call unsafe to repeat fails with the first error", async () => {
    const f = faulty("kioku.v1.SessionService/CreateSession", Code.Unavailable);
    const c = createKiokuClient({ baseUrl: kioku.url, fetch: f.fetch, retry: fast });
    await assert.rejects(c.sessions.createSession({ parent: userName("retry", "cy") }), (e) => e.code === Code.Unavailable);
    assert.equal(f.calls.length, 1);
  });

  test("the call's timeout ends the retries", async () => {
    const f = faulty("kioku.v1.SessionService/GetSession", Code.Unavailable, 1000);
    const c = createKiokuClient({ baseUrl: kioku.url, fetch: f.fetch, retry: { maxAttempts: 1000, initialBackoffMs: 60_000 } });
    const start = Date.now();
    await assert.rejects(c.sessions.getSession({ name: sessionName("retry", "bob", "s") }, { timeoutMs: 300 }));
    assert.ok(Date.now() - start < 5000, `gave up after ${Date.now() - start} ms`);
    assert.equal(f.calls.length, 1);
  });

  test("newEventId gives distinct version-4 UUIDs", () => {
    const ids = new Set(Array.from({ length: 100 }, newEventId));
    assert.equal(ids.size, 100);
  });
});
