// The browser test's page: with the bundled @kioku-ai/client it makes a
// round trip against the kioku named in its URL (?kioku=URL&key=KEY), as
// the user the key is confined to, then reports what happened to the page's
// own origin (POST /result).
import { Code, ConnectError, createKiokuClient, userName } from "@kioku-ai/client";

async function roundTrip(baseUrl, apiKey) {
  const steps = [];
  for (const transport of ["connect", "grpc-web"]) {
    const kioku = createKiokuClient({ baseUrl, apiKey, transport });
    const s = await kioku.sessions.createSession({ parent: userName("demo", "ann"), session: { state: { page: transport } } });
    const { event } = await kioku.sessions.appendEvent({
      name: s.name,
      event: { author: "user", content: { role: "user", parts: [{ text: `hello from ${transport}` }] }, actions: { stateDelta: { "user:browser": true } } },
    });
    const got = await kioku.sessions.getSession({ name: s.name });
    steps.push({ transport, name: s.name, sequence: String(event.sequence), state: got.state, text: got.events[0]?.content?.parts[0]?.text });
  }
  // The key confines the page to its user.
  const kioku = createKiokuClient({ baseUrl, apiKey });
  try {
    await kioku.sessions.createSession({ parent: userName("demo", "bob") });
    steps.push({ otherUser: "allowed" });
  } catch (err) {
    steps.push({ otherUser: Code[ConnectError.from(err).code] });
  }
  return steps;
}

const params = new URLSearchParams(location.search);
let report;
try {
  report = { ok: true, steps: await roundTrip(params.get("kioku"), params.get("key")) };
} catch (err) {
  const e = ConnectError.from(err);
  report = { ok: false, code: Code[e.code], message: e.rawMessage };
}
await fetch("/result", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(report) });
