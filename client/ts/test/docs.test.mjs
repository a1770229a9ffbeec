// The TypeScript programs of the repository's README and docs/clients.md,
// run as a reader runs them: each ```js block that the page follows with
// its output (a ```console block starting "$ node main.mjs") is written
// into this package (so that "@kioku-ai/client" resolves to it, as in a
// project that installed it), pointed at a fresh kioku serve instead of
// 127.0.0.1:8080, and must print what the page shows. The output matches
// as in docs/console_test.go: "..." stands for any text (a line of just
// "...", for any lines), a timestamp for any timestamp, an id of 20
// lower-case letters and digits for any such id, and a JSON line ignores
// spaces.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { after, test } from "node:test";
import { promisify } from "node:util";

import { startKioku } from "./kioku.mjs";

const run = promisify(execFile);
const repo = new URL("../../../", import.meta.url);
const docsAddr = "http://127.0.0.1:8080";

/** Returns a page's fenced blocks: language, body and the block just before. */
export function blocks(text) {
  const out = [];
  let cur = null;
  let prev = null;
  let gap = true;
  for (const line of text.split("\n")) {
    if (cur === null) {
      if (line.startsWith("```")) {
        cur = { lang: line.slice(3).trim().split(" ")[0], lines: [], after: gap ? null : prev };
      } else if (line.trim() !== "") {
        gap = true;
        prev = null;
      }
      continue;
    }
    if (line === "```") {
      out.push(cur);
      prev = cur;
      gap = false;
      cur = null;
      continue;
    }
    cur.lines.push(line);
  }
  return out;
}

const timestamp = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/;
const varying = new RegExp(`${timestamp.source}|\\b[a-z0-9]{20}\\b`, "g");
const quote = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** The regular expression a shown output line stands for. */
export function linePattern(want) {
  const json = want.startsWith("{") || want.startsWith("[");
  if (json) want = want.replace(/\s+/g, "");
  const parts = want.split("...").map((part) => {
    let out = "";
    let at = 0;
    for (const m of part.matchAll(varying)) {
      out += quote(part.slice(at, m.index));
      out += timestamp.test(m[0]) ? timestamp.source : "[a-z0-9]{20}";
      at = m.index + m[0].length;
    }
    return out + quote(part.slice(at));
  });
  return { re: new RegExp(`^${parts.join(".*?")}$`), json };
}

/** Whether the output lines got match the shown lines want. */
export function matchOutput(want, got) {
  if (want.length === 0) return got.length === 0;
  if (want[0].trim() === "...") {
    for (let i = 0; i <= got.length; i++) {
      if (matchOutput(want.slice(1), got.slice(i))) return true;
    }
    return false;
  }
  if (got.length === 0) return false;
  const { re, json } = linePattern(want[0].trimEnd());
  let line = got[0].trimEnd();
  if (json) line = line.replace(/\s+/g, "");
  return re.test(line) && matchOutput(want.slice(1), got.slice(1));
}

test("the matcher", () => {
  assert.ok(matchOutput([`{"a": 1, ...}`], [`{"a":1,"b":2}`]));
  assert.ok(!matchOutput([`{"a": 2, ...}`], [`{"a":1,"b":2}`]));
  assert.ok(matchOutput(["x", "...", "z"], ["x", "1", "2", "z"]));
  assert.ok(matchOutput([`{"n":"apps/demo/users/ann/sessions/zcgjfpm3lccjxgapmc9d"}`], [`{"n":"apps/demo/users/ann/sessions/abcdefghij0123456789"}`]));
  assert.ok(!matchOutput(["1n"], ["2n"]));
});

const programs = [];
for (const page of ["README.md", "docs/clients.md"]) {
  const text = readFileSync(new URL(page, repo), "utf8");
  for (const b of blocks(text)) {
    if (b.lang === "console" && b.after?.lang === "js" && b.lines[0]?.startsWith("$ node ")) {
      programs.push({ page, source: b.after.lines.join("\n") + "\n", want: b.lines.slice(1) });
    }
  }
}

test("the pages show TypeScript programs with their output", () => {
  assert.ok(programs.length >= 2, `found ${programs.length} programs with output in README.md and docs/clients.md`);
});

const dir = new URL("../.test/docs/", import.meta.url);
for (const [i, p] of programs.entries()) {
  test(`${p.page}: program ${i + 1} prints what the page shows`, async () => {
    const kioku = await startKioku();
    try {
      assert.ok(p.source.includes(docsAddr), `the program does not call kioku at ${docsAddr}`);
      mkdirSync(dir, { recursive: true });
      const file = new URL(`main-${i + 1}.mjs`, dir);
      writeFileSync(file, p.source.replaceAll(docsAddr, kioku.url));
      const { stdout } = await run(process.execPath, [file.pathname], { timeout: 60_000 });
      const got = stdout.replaceAll(kioku.url, docsAddr).trimEnd().split("\n");
      assert.ok(matchOutput(p.want, got), `printed:\n${got.join("\n")}\nwhere ${p.page} shows:\n${p.want.join("\n")}`);
    } finally {
      await kioku.stop();
    }
  });
}

after(() => rmSync(dir, { recursive: true, force: true }));
