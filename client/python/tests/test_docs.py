"""The Python programs of the repository's README and docs/clients.md, run
as a reader runs them: each ```python block that the page follows with its
output (a ```console block whose command runs `python3 main.py`) is written
to a file, pointed at a fresh kioku serve instead of 127.0.0.1:8080, run
with this interpreter and client/python/src on the path, and must print
what the page shows. The output matches as in docs/console_test.go: "..."
stands for any text (a line of just "...", for any lines), a timestamp for
any timestamp, an id of 20 lower-case letters and digits for any such id,
and a JSON line ignores spaces."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

from kioku_server import REPO, Kioku

DOCS_ADDR = "127.0.0.1:8080"
TIMESTAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"
VARYING = re.compile(TIMESTAMP + r"|\b[a-z0-9]{20}\b")


def blocks(text):
    """A page's fenced blocks as dicts: lang, lines, and after (the block
    just before it, when only blank lines lie between)."""
    out, cur, prev, gap = [], None, None, True
    for line in text.split("\n"):
        if cur is None:
            if line.startswith("```"):
                cur = {"lang": line[3:].strip().split(" ")[0], "lines": [], "after": None if gap else prev}
            elif line.strip():
                gap, prev = True, None
            continue
        if line == "```":
            out.append(cur)
            prev, gap, cur = cur, False, None
            continue
        cur["lines"].append(line)
    return out


def line_pattern(want):
    """The regular expression a shown output line stands for, and whether
    the line is JSON (spaces ignored)."""
    is_json = want.startswith("{") or want.startswith("[")
    if is_json:
        want = re.sub(r"\s+", "", want)
    parts = []
    for part in want.split("..."):
        out, at = "", 0
        for m in VARYING.finditer(part):
            out += re.escape(part[at:m.start()])
            out += TIMESTAMP if re.fullmatch(TIMESTAMP, m.group(0)) else "[a-z0-9]{20}"
            at = m.end()
        parts.append(out + re.escape(part[at:]))
    return re.compile("^" + ".*?".join(parts) + "$"), is_json


def match_output(want, got):
    """Whether the output lines got match the shown lines want."""
    if not want:
        return not got
    if want[0].strip() == "...":
        return any(match_output(want[1:], got[i:]) for i in range(len(got) + 1))
    if not got:
        return False
    pattern, is_json = line_pattern(want[0].rstrip())
    line = got[0].rstrip()
    if is_json:
        line = re.sub(r"\s+", "", line)
    return bool(pattern.match(line)) and match_output(want[1:], got[1:])


def programs():
    """(page, source, shown output) of every program with its output."""
    out = []
    for page in ("README.md", os.path.join("docs", "clients.md")):
        with open(os.path.join(REPO, page)) as f:
            for b in blocks(f.read()):
                after = b["after"]
                if b["lang"] == "console" and after and after["lang"] == "python" and b["lines"] and "python3 main.py" in b["lines"][0]:
                    out.append((page, "\n".join(after["lines"]) + "\n", b["lines"][1:]))
    return out


class Matcher(unittest.TestCase):
    def test_matcher(self):
        self.assertTrue(match_output(['{"a": 1, ...}'], ['{"a":1,"b":2}']))
        self.assertFalse(match_output(['{"a": 2, ...}'], ['{"a":1,"b":2}']))
        self.assertTrue(match_output(["x", "...", "z"], ["x", "1", "2", "z"]))
        self.assertFalse(match_output(["watched 1 user"], ["watched 2 user"]))


class DocsPrograms(unittest.TestCase):
    def test_programs_print_what_the_pages_show(self):
        found = programs()
        self.assertGreaterEqual(len(found), 2, "the README and docs/clients.md show a Python program with its output each")
        for i, (page, source, want) in enumerate(found):
            with self.subTest(page=page, program=i + 1):
                self.assertIn(DOCS_ADDR, source, "the program does not call kioku at " + DOCS_ADDR)
                server = Kioku()
                try:
                    with tempfile.TemporaryDirectory() as d:
                        main = os.path.join(d, "main.py")
                        with open(main, "w") as f:
                            f.write(source.replace(DOCS_ADDR, server.target))
                        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "client", "python", "src"))
                        r = subprocess.run([sys.executable, main], capture_output=True, text=True, env=env, timeout=60)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    got = r.stdout.replace(server.target, DOCS_ADDR).rstrip("\n").split("\n")
                    self.assertTrue(match_output(want, got), "printed:\n%s\nwhere %s shows:\n%s" % ("\n".join(got), page, "\n".join(want)))
                finally:
                    server.stop()


if __name__ == "__main__":
    unittest.main()
