// The MCP Inspector's command line (@modelcontextprotocol/inspector,
// `mcp-inspector --cli`) against kioku's MCP server, over Streamable HTTP
// (--transport http with an Authorization header) and over `kioku mcp`'s
// stdio (the command after --): it lists the tools, saves a fact and finds
// it again once the operation is done, runs the memory file tool, and is
// refused another user's memories.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";

import { kiokuBin, startKioku, toolNames, waitOperation } from "../lib/harness.mjs";

const inspector = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "node_modules", ".bin", "mcp-inspector");
const run = promisify(execFile);
// kioku mcp would read a key from $KIOKU_KEY: only the test's keys count.
const { KIOKU_KEY, KIOKU_SERVER, ...env } = process.env;

let kioku;
let home;
before(async () => {
  kioku = await startKioku();
  // The CLI keeps its state under ~/.mcp-inspector: a fresh home, not the user's.
  home = mkdtempSync(path.join(tmpdir(), "kioku-mcp-inspector-"));
});
after(async () => {
  await kioku?.stop();
  rmSync(home, { recursive: true, force: true });
});

/**
 * The target arguments: kioku's URL with the key's header (and
 * --stored-auth-only, so that a 401 fails instead of starting OAuth in a
 * browser), or kioku mcp after --.
 */
function target(transport, key, user) {
  if (transport === "http") {
    return [new URL(user ? `/mcp/${user}` : "/mcp", kioku.url).href, "--transport", "http", ...(key ? ["--header", `Authorization: Bearer ${key}`] : []), "--stored-auth-only"];
  }
  return ["--", kiokuBin(), "mcp", "--server", kioku.url, ...(key ? ["--key", key] : []), ...(user ? ["--user", user] : [])];
}

/** Runs the CLI: its JSON answer, or {status, stderr} when it fails. */
async function cli(method, tgt) {
  // The method last, except before stdio's command, which ends the line.
  const line = tgt[0] === "--" ? ["--cli", "--method", ...method, ...tgt] : ["--cli", ...tgt, "--method", ...method];
  try {
    const { stdout } = await run(inspector, line, { env: { ...env, HOME: home }, timeout: 60_000 });
    return JSON.parse(stdout);
  } catch (e) {
    if (e.code === undefined || typeof e.code !== "number") throw e;
    return { status: e.code, stderr: e.stderr };
  }
}

const call = async (tgt, tool, ...args) => {
  const res = await cli(["tools/call", "--tool-name", tool, ...(args.length ? ["--tool-arg", ...args] : [])], tgt);
  assert.ok(res.structuredContent && !res.isError, `${tool}: ${JSON.stringify(res)}`);
  return res.structuredContent;
};

for (const transport of ["http", "stdio"]) {
  test(`the Inspector CLI over ${transport}: tools, save and load, the memory file tool`, async () => {
    const ann = target(transport, kioku.keys.ann);
    const { tools } = await cli(["tools/list"], ann);
    assert.deepEqual(tools.map((t) => t.name).sort(), toolNames);

    const fact = `Ann flies a red kite over ${transport}.`;
    const saved = await call(ann, "save_to_memory", `fact=${fact}`);
    assert.equal(saved.saved, true);
    await waitOperation(kioku.url, kioku.keys.ann, saved.operation);
    const loaded = await call(ann, "load_memory", `query=red kite over ${transport}`);
    assert.ok(loaded.memories.includes(fact), `load_memory: ${JSON.stringify(loaded)}`);

    const file = `/memories/inspector-${transport}.md`;
    assert.deepEqual(await call(ann, "memory", "command=create", `path=${file}`, "file_text=Ann keeps bees."), {
      output: `File created successfully at: ${file}`,
    });
    assert.deepEqual(await call(ann, "memory", "command=view", `path=${file}`), {
      output: `Here's the content of ${file} with line numbers:\n     1\tAnn keeps bees.`,
    });
  });

  test(`the Inspector CLI over ${transport}: another user's memories are refused`, async () => {
    const bob = target(transport, kioku.keys.bob);
    const fact = `Bob hides a key under the ${transport} mat.`;
    const saved = await call(bob, "save_to_memory", `fact=${fact}`);
    await waitOperation(kioku.url, kioku.keys.bob, saved.operation);
    assert.ok((await call(bob, "load_memory", `query=key under the ${transport} mat`)).memories.includes(fact));

    const ann = await call(target(transport, kioku.keys.ann), "load_memory", `query=key under the ${transport} mat`);
    assert.ok(!ann.memories.includes(fact), `ann read bob's memory: ${JSON.stringify(ann)}`);
    for (const [key, user, why] of [
      [kioku.keys.ann, "apps/demo/users/bob", /permission_denied: the path names user \\*"bob\\*"/],
      [kioku.keys.app, undefined, /permission_denied: \/mcp serves a user key/],
      [undefined, "apps/demo/users/bob", /unauthenticated: this server needs an API key/],
      ["kioku_garbage", undefined, /unauthenticated: unknown API key/],
    ]) {
      const res = await cli(["tools/call", "--tool-name", "load_memory", "--tool-arg", `query=key under the ${transport} mat`], target(transport, key, user));
      assert.ok(res.status > 0, `${user ?? "/mcp"} answered: ${JSON.stringify(res)}`);
      assert.match(res.stderr, why);
    }
  });
}
