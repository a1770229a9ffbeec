// The TypeScript MCP SDK's client (@modelcontextprotocol/sdk) against
// kioku's MCP server, over Streamable HTTP (with the key as a bearer
// header) and over `kioku mcp`'s stdio: it lists the tools, saves a fact
// and finds it again once the operation is done, runs the memory file
// tool, and is refused another user's memories.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

import { kiokuBin, startKioku, toolNames, waitOperation } from "../lib/harness.mjs";

let kioku;
before(async () => {
  kioku = await startKioku();
});
after(() => kioku?.stop());

/** A connected client: over HTTP at /mcp (or user's path), or through kioku mcp. */
async function connect(transport, key, user) {
  const client = new Client({ name: "kioku-mcp-test", version: "1.0.0" });
  if (transport === "http") {
    const url = new URL(user ? `/mcp/${user}` : "/mcp", kioku.url);
    const headers = key ? { Authorization: `Bearer ${key}` } : {};
    await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers } }));
  } else {
    const args = ["mcp", "--server", kioku.url];
    if (key) args.push("--key", key);
    if (user) args.push("--user", user);
    await client.connect(new StdioClientTransport({ command: kiokuBin(), args, stderr: "pipe" }));
  }
  return client;
}

const structured = (result) => {
  assert.equal(result.isError ?? false, false, `tool error: ${JSON.stringify(result.content)}`);
  return result.structuredContent;
};

for (const transport of ["http", "stdio"]) {
  test(`the TypeScript SDK over ${transport}: tools, save and load, the memory file tool`, async () => {
    const client = await connect(transport, kioku.keys.ann);
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), toolNames);
      const load = tools.find((t) => t.name === "load_memory");
      assert.deepEqual(load.inputSchema.required, ["query"]);
      assert.equal(load.outputSchema.type, "object");

      const fact = `Ann's favourite tea over ${transport} is genmaicha.`;
      const saved = structured(await client.callTool({ name: "save_to_memory", arguments: { fact } }));
      assert.equal(saved.saved, true);
      assert.match(saved.operation, /^apps\/demo\/operations\//);
      await waitOperation(kioku.url, kioku.keys.ann, saved.operation);
      const loaded = structured(await client.callTool({ name: "load_memory", arguments: { query: `favourite tea over ${transport}` } }));
      assert.ok(loaded.memories.includes(fact), `load_memory: ${JSON.stringify(loaded)}`);
      // The text content carries the same result, for hosts that read only it.
      const text = (await client.callTool({ name: "load_memory", arguments: { query: "genmaicha" } })).content[0].text;
      assert.ok(JSON.parse(text).memories.includes(fact));

      const path = `/memories/${transport}.md`;
      const created = structured(await client.callTool({ name: "memory", arguments: { command: "create", path, file_text: "Ann swims on Sundays.\n" } }));
      assert.equal(created.output, `File created successfully at: ${path}`);
      const viewed = structured(await client.callTool({ name: "memory", arguments: { command: "view", path } }));
      assert.equal(viewed.output, `Here's the content of ${path} with line numbers:\n     1\tAnn swims on Sundays.`);
      const bad = await client.callTool({ name: "memory", arguments: { command: "create", path: "/etc/passwd", file_text: "x" } });
      assert.equal(bad.isError, true);
      assert.match(bad.content[0].text, /is not allowed/);
    } finally {
      await client.close();
    }
  });

  test(`the TypeScript SDK over ${transport}: another user's memories are refused`, async () => {
    // Bob saves a fact of his own.
    const bob = await connect(transport, kioku.keys.bob);
    const fact = `Bob's secret over ${transport} is the word pelican.`;
    try {
      const saved = structured(await bob.callTool({ name: "save_to_memory", arguments: { fact } }));
      await waitOperation(kioku.url, kioku.keys.bob, saved.operation);
      assert.ok(structured(await bob.callTool({ name: "load_memory", arguments: { query: "secret word pelican" } })).memories.includes(fact));
    } finally {
      await bob.close();
    }
    // Ann's key at /mcp reaches only Ann.
    const ann = await connect(transport, kioku.keys.ann);
    try {
      const loaded = structured(await ann.callTool({ name: "load_memory", arguments: { query: "secret word pelican" } }));
      assert.ok(!loaded.memories.includes(fact), `ann read bob's memory: ${JSON.stringify(loaded)}`);
      const viewed = structured(await ann.callTool({ name: "memory", arguments: { command: "view", path: "/memories" } }));
      assert.doesNotMatch(viewed.output, /bob/);
    } finally {
      await ann.close();
    }
    // Ann's key at Bob's path, an app key at /mcp, no key, an unknown key:
    // refused before any tool (over HTTP the error's JSON escapes quotes).
    for (const [key, user, why] of [
      [kioku.keys.ann, "apps/demo/users/bob", /permission_denied: the path names user \\?"bob\\?"; this API key may reach user \\?"ann\\?" only/],
      [kioku.keys.app, undefined, /permission_denied: \/mcp serves a user key/],
      [undefined, "apps/demo/users/bob", /unauthenticated: this server needs an API key/],
      ["kioku_garbage", "apps/demo/users/bob", /unauthenticated: unknown API key/],
    ]) {
      const refused = await connect(transport, key, user).then(
        async (client) => {
          await client.close();
          return null;
        },
        (e) => e,
      );
      assert.ok(refused, `key ${key?.slice(0, 12)} at ${user ?? "/mcp"} was let in`);
      assert.match(refused.message, why);
    }
  });
}
