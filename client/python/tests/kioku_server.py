"""Starts a real `kioku serve` for the tests.

The binary is $KIOKU_BIN, or built from this repository into
client/python/.test/kioku once per test run (Go needed).
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
_built = None


def binary():
    global _built
    if os.environ.get("KIOKU_BIN"):
        return os.environ["KIOKU_BIN"]
    if _built is None:
        out = os.path.join(REPO, "client", "python", ".test", "kioku")
        subprocess.run(["go", "build", "-o", out, "./cmd/kioku"], cwd=REPO, check=True)
        _built = out
    return _built


class Kioku:
    """A kioku serve on a free loopback port with its data in a new
    directory: target is host:port, url is http://host:port."""

    def __init__(self, *flags):
        self.dir = tempfile.mkdtemp(prefix="kioku-py-")
        self.proc = subprocess.Popen(
            [binary(), "serve", "--addr", "127.0.0.1:0", "--data-dir", os.path.join(self.dir, "data"), "--log-level", "warn", *flags],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        log = []
        found = threading.Event()

        def read():
            for line in self.proc.stderr:
                log.append(line)
                m = re.search(r"kioku listening on (http://(\S+))", line)
                if m and not found.is_set():
                    self.url, self.target = m.group(1), m.group(2)
                    found.set()

        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()
        if not found.wait(20):
            self.proc.kill()
            raise RuntimeError("kioku did not start in 20s:\n" + "".join(log))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.reader.join(10)  # it ends at the pipe's end, once kioku has exited
        self.proc.stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def make_key(app, user=None):
    """A new API key from `kioku key`: (key, key-file entry)."""
    args = [binary(), "key", "--app", app, "--name", f"py-test-{app}-{user or 'app'}"]
    if user:
        args += ["--user", user]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    key = re.search(r"kioku_[A-Za-z0-9_-]+", out).group(0)
    entry = json.loads(re.search(r'\{"name".*\}', out).group(0))
    return key, entry


def key_file(directory, *entries):
    """Writes an --auth-keys file of the entries; returns its path."""
    path = os.path.join(directory, "keys.json")
    with open(path, "w") as f:
        json.dump({"keys": list(entries)}, f)
    return path
