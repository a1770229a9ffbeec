// The OpenAPI document of the REST bindings validates (swagger-parser:
// the OpenAPI 3 schema, $refs, path parameters, unique operationIds), and
// the server serves it. That every operation reaches its method on the
// server is checked by internal/transport/openapi_test.go.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";

import SwaggerParser from "@apidevtools/swagger-parser";

import { startKioku } from "./kioku.mjs";

const file = new URL("../../../internal/transport/openapi/openapi.yaml", import.meta.url).pathname;

let kioku;
before(async () => {
  kioku = await startKioku();
});
after(() => kioku?.stop());

test("openapi.yaml validates", async () => {
  const api = await SwaggerParser.validate(file);
  assert.match(api.openapi, /^3\.0\./);
  const operations = Object.values(api.paths).flatMap((methods) => Object.values(methods).map((op) => op.operationId));
  assert.equal(new Set(operations).size, operations.length);
  assert.ok(operations.includes("SessionService_AppendEvent") && operations.includes("MemoryBankService_RetrieveMemories") && operations.includes("OperationService_WaitOperation"));
});

test("the server serves it", async () => {
  const res = await fetch(`${kioku.url}/openapi.yaml`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("content-type"), "application/yaml");
  assert.equal(await res.text(), readFileSync(file, "utf8"));
});

test("a REST call of the document answers as it says", async () => {
  const res = await fetch(`${kioku.url}/v1/apps/demo/users/ann/sessions?sessionId=rest`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ displayName: "over REST" }),
  });
  assert.equal(res.status, 200);
  const session = await res.json();
  assert.equal(session.name, "apps/demo/users/ann/sessions/rest");
  assert.equal(session.displayName, "over REST");
});
