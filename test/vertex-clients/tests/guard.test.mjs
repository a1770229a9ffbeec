// The loopback guard of the harness: a client that reaches beyond
// loopback (the GCE metadata server's address, a Google endpoint) is
// refused at once and recorded, so the tests that assert no escapes
// would fail.
import { escapes } from "../lib/harness.mjs";

import assert from "node:assert/strict";
import dns from "node:dns";
import http from "node:http";
import { test } from "node:test";

test("connections and lookups beyond loopback are refused and recorded", async () => {
  await assert.rejects(fetch("http://169.254.169.254/computeMetadata/v1/"), /fetch failed/);
  await assert.rejects(
    new Promise((resolve, reject) => http.get("http://10.1.2.3:80/", resolve).on("error", reject)),
    /loopback only/,
  );
  await assert.rejects(dns.promises.lookup("aiplatform.googleapis.com"), /loopback only/);
  assert.deepEqual(escapes.splice(0), ["169.254.169.254:80", "10.1.2.3:80", "dns:aiplatform.googleapis.com"]);
});
