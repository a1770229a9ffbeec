// The memory file tool through the TypeScript client against a real kioku
// serve behind API keys: a model's tool_use inputs run with runMemoryTool
// and files.execute under a user key, the documented answers, traversal
// refused with nothing written, the operators' reads, and another user's
// key reaching nothing.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Code, ConnectError, MemoryFileAction, createKiokuClient, memoryFileName, runMemoryTool, userName } from "../dist/index.js";
import { keyFile, makeKey, startKioku } from "./kioku.mjs";

let kioku;
const ann = makeKey("demo", "ann");
const bob = makeKey("demo", "bob");
before(async () => {
  kioku = await startKioku("--auth-keys", keyFile(ann.entry, bob.entry));
});
after(() => kioku?.stop());

test("the memory tool's commands, as a backend forwards them", async () => {
  for (const transport of ["connect", "grpc-web"]) {
    const c = createKiokuClient({ baseUrl: kioku.url, apiKey: ann.key, transport });
    const user = userName("demo", "ann");
    const dir = `/memories/${transport}`;
    const run = (input) => runMemoryTool(c, user, input);

    assert.deepEqual(await run({ command: "create", path: `${dir}/notes.md`, file_text: "Ann likes tea.\n" }), {
      content: `File created successfully at: ${dir}/notes.md`,
      is_error: false,
    });
    assert.deepEqual(await run({ command: "str_replace", path: `${dir}/notes.md`, old_str: "tea", new_str: "green tea" }), {
      content: "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tAnn likes green tea.",
      is_error: false,
    });
    assert.deepEqual(await run({ command: "insert", path: `${dir}/notes.md`, insert_line: 1, insert_text: "Ann swims.\n" }), {
      content: `The file ${dir}/notes.md has been edited.`,
      is_error: false,
    });
    assert.deepEqual(await run({ command: "view", path: `${dir}/notes.md`, view_range: [2, -1] }), {
      content: `Here's the content of ${dir}/notes.md with line numbers:\n     2\tAnn swims.`,
      is_error: false,
    });
    assert.deepEqual(await run({ command: "view", path: dir }), {
      content: `Here're the files and directories up to 2 levels deep in ${dir}, excluding hidden items and node_modules:\n32B\t${dir}\n32B\t${dir}/notes.md`,
      is_error: false,
    });
    assert.deepEqual(await run({ command: "str_replace", path: `${dir}/notes.md`, old_str: "coffee", new_str: "x" }), {
      content: `No replacement was performed, old_str \`coffee\` did not appear verbatim in ${dir}/notes.md.`,
      is_error: true,
    });

    // Traversal is refused and writes nothing.
    const before = await c.files.listMemoryFiles({ parent: user, path: dir, showDeleted: true });
    for (const path of ["/memories/../etc/passwd", "/etc/passwd", "/memories/%2e%2e/etc/passwd", "memories/x"]) {
      const res = await run({ command: "create", path, file_text: "root" });
      assert.equal(res.is_error, true, `create ${path}: ${res.content}`);
      assert.match(res.content, /^Error: The path .* is not allowed: it /);
    }
    const after = await c.files.listMemoryFiles({ parent: user, path: dir, showDeleted: true });
    assert.equal(after.memoryFiles.length, before.memoryFiles.length);
    assert.equal(after.memoryFiles[0].revision, 3n);

    // The operators' reads.
    const file = await c.files.getMemoryFile({ name: after.memoryFiles[0].name });
    assert.equal(file.content, "Ann likes green tea.\nAnn swims.\n");
    assert.equal(file.sizeBytes, 32n);
    assert.match(file.name, /^apps\/demo\/users\/ann\/memoryFiles\/[a-z0-9]+$/);
    const id = file.name.split("/").pop();
    assert.equal(memoryFileName("demo", "ann", id), file.name);
    const revs = await c.files.listMemoryFileRevisions({ parent: file.name });
    assert.deepEqual(
      revs.memoryFileRevisions.map((r) => r.action),
      [MemoryFileAction.EDITED, MemoryFileAction.EDITED, MemoryFileAction.CREATED],
    );
    assert.equal(revs.memoryFileRevisions[2].content, "Ann likes tea.\n");

    assert.deepEqual(await run({ command: "delete", path: dir }), { content: `Successfully deleted ${dir}`, is_error: false });
  }
});

test("another user's key reaches nothing of ann's files", async () => {
  const c = createKiokuClient({ baseUrl: kioku.url, apiKey: bob.key });
  const denied = (promise) =>
    assert.rejects(promise, (err) => err instanceof ConnectError && err.code === Code.PermissionDenied);
  await denied(c.files.execute({ parent: userName("demo", "ann"), input: { command: "view", path: "/memories" } }));
  await denied(c.files.listMemoryFiles({ parent: userName("demo", "ann") }));
  const own = await runMemoryTool(c, userName("demo", "bob"), { command: "view", path: "/memories" });
  assert.equal(own.content, "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n0B\t/memories");
});
