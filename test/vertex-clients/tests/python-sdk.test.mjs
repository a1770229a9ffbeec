// The Vertex AI SDK's REST requests (Python), reproduced with Python's
// standard library (python/sdk_requests.py), against kioku: one without
// keys, and one that requires API keys for express mode.
import { escapes, newKey, startGemini, startKioku, engineId } from "../lib/harness.mjs";

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "python");

let gemini, kioku, keyed, key;
before(async () => {
  gemini = await startGemini();
  kioku = await startKioku({ gemini });
  let entry;
  [key, entry] = newKey("express", engineId);
  keyed = await startKioku({ keys: [entry] });
});
after(async () => {
  await kioku?.stop();
  await keyed?.stop();
  gemini?.close();
  assert.deepEqual(escapes, [], "connections beyond loopback");
});

test("the Vertex AI SDK's requests", async () => {
  const python = process.env.KIOKU_PYTHON || "python3";
  const env = { ...process.env, KIOKU_URL: kioku.url, KIOKU_KEYED_URL: keyed.url, KIOKU_KEY: key, PYTHONDONTWRITEBYTECODE: "1" };
  const proc = spawn(python, ["-m", "unittest", "-v", "sdk_requests"], { cwd: dir, env });
  let out = "";
  proc.stdout.on("data", (d) => (out += d));
  proc.stderr.on("data", (d) => (out += d));
  const code = await new Promise((resolve) => proc.on("exit", resolve));
  assert.equal(code, 0, out);
  assert.match(out, /Ran 3 tests/);
});
