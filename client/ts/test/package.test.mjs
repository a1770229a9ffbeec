// The package as a program outside the repository gets it: `npm pack`
// (--ignore-scripts: npm test has just built dist/, which prepack would
// build again), then `npm install` of the tarball into a new project (from
// npm's cache where it holds the packages: `npm ci` fills it with their
// tarballs, but not always with the registry's metadata that resolving the
// tarball's dependency ranges reads, so --prefer-offline, not --offline,
// which fails on a machine whose cache was filled by npm ci alone), a
// TypeScript program type-checked against the installed declarations, and
// a JavaScript program that imports "@kioku-ai/client" and makes a round
// trip against a real kioku.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { startKioku } from "./kioku.mjs";

const pkgDir = new URL("..", import.meta.url).pathname;
const tsc = join(pkgDir, "node_modules", ".bin", "tsc");

let kioku;
let project;
before(async () => {
  kioku = await startKioku();
  project = mkdtempSync(join(tmpdir(), "kioku-ts-outside-"));
});
after(async () => {
  await kioku?.stop();
  if (project) {
    rmSync(project, { recursive: true, force: true });
  }
});

const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

test("npm install of the packed tarball, then import and a round trip", async () => {
  const packed = JSON.parse(run("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", project], pkgDir));
  const tarball = join(project, packed[0].filename);
  const files = packed[0].files.map((f) => f.path);
  assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts"), `packed files: ${files}`);
  assert.ok(!files.some((f) => f.startsWith("test/") || f.startsWith("node_modules/")), `packed files: ${files}`);

  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "outside", private: true, type: "module" }));
  run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball], project);

  writeFileSync(
    join(project, "main.ts"),
    `import { createKiokuClient, userName, toJson, SessionSchema, type Session } from "@kioku-ai/client";
const kioku = createKiokuClient({ baseUrl: process.argv[2] });
const s: Session = await kioku.sessions.createSession({ parent: userName("demo", "outside"), session: { state: { from: "outside" } } });
const seq: bigint = s.lastSequence;
console.log(JSON.stringify(toJson(SessionSchema, s)), seq);
`,
  );
  writeFileSync(
    join(project, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, types: [], lib: ["ES2022", "DOM"] }, files: ["main.ts", "globals.d.ts"] }),
  );
  writeFileSync(join(project, "globals.d.ts"), "declare const process: { argv: string[] };\n");
  run(tsc, ["-p", "."], project);

  writeFileSync(
    join(project, "main.mjs"),
    `import { createKiokuClient, userName, toJson, SessionSchema } from "@kioku-ai/client";
const kioku = createKiokuClient({ baseUrl: process.argv[2] });
const s = await kioku.sessions.createSession({ parent: userName("demo", "outside"), session: { state: { from: "outside" } } });
console.log(JSON.stringify(toJson(SessionSchema, s)));
`,
  );
  const out = JSON.parse(run("node", ["main.mjs", kioku.url], project));
  assert.match(out.name, /^apps\/demo\/users\/outside\/sessions\//);
  assert.deepEqual(out.state, { from: "outside" });
});
