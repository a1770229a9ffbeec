"""The memory file tool through the Python client against a real kioku
serve behind API keys: a model's tool_use inputs run with run_memory_tool
under a user key, the documented answers, traversal refused with nothing
written, the operators' reads and their iterators, and another user's key
reaching nothing."""

import shutil
import tempfile
import unittest

import grpc

import kioku
from kioku.v1 import memory_file_service_pb2 as mf

from kioku_server import Kioku, key_file, make_key


class MemoryFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kioku-py-files-")
        cls.ann_key, ann_entry = make_key("demo", "ann")
        cls.bob_key, bob_entry = make_key("demo", "bob")
        cls.server = Kioku("--auth-keys", key_file(cls.dir, ann_entry, bob_entry))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        self.c = kioku.Client(self.server.target, api_key=self.ann_key)
        self.addCleanup(self.c.close)
        self.user = kioku.user_name("demo", "ann")

    def run_tool(self, tool_input):
        return self.c.run_memory_tool(self.user, tool_input)

    def test_the_commands_as_a_backend_forwards_them(self):
        ok = lambda content: {"content": content, "is_error": False}
        self.assertEqual(
            self.run_tool({"command": "create", "path": "/memories/notes.md", "file_text": "Ann likes tea.\n"}),
            ok("File created successfully at: /memories/notes.md"),
        )
        self.assertEqual(
            self.run_tool({"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "green tea"}),
            ok("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\tAnn likes green tea."),
        )
        self.assertEqual(
            self.run_tool({"command": "insert", "path": "/memories/notes.md", "insert_line": 0, "insert_text": "# Ann\n"}),
            ok("The file /memories/notes.md has been edited."),
        )
        self.assertEqual(
            self.run_tool({"command": "view", "path": "/memories/notes.md", "view_range": [2, 2]}),
            ok("Here's the content of /memories/notes.md with line numbers:\n     2\tAnn likes green tea."),
        )
        self.assertEqual(
            self.run_tool({"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/people/ann.md"}),
            ok("Successfully renamed /memories/notes.md to /memories/people/ann.md"),
        )
        self.assertEqual(
            self.run_tool({"command": "view", "path": "/memories/people"}),
            ok(
                "Here're the files and directories up to 2 levels deep in /memories/people, excluding hidden items and node_modules:\n"
                "27B\t/memories/people\n27B\t/memories/people/ann.md"
            ),
        )
        self.assertEqual(
            self.run_tool({"command": "delete", "path": "/memories/nothing.md"}),
            {"content": "Error: The path /memories/nothing.md does not exist", "is_error": True},
        )

        # Traversal is refused and writes nothing.
        people = mf.ListMemoryFilesRequest(parent=self.user, path="/memories/people", show_deleted=True)
        everything = mf.ListMemoryFilesRequest(parent=self.user, show_deleted=True)
        before = list(self.c.list_memory_files(everything))
        for path in ["/memories/../etc/passwd", "/etc/passwd", "/memories/%2e%2e/etc/passwd", "memories/x"]:
            res = self.run_tool({"command": "create", "path": path, "file_text": "root"})
            self.assertTrue(res["is_error"], res)
            self.assertRegex(res["content"], r"^Error: The path .* is not allowed: it ")
        self.assertEqual(list(self.c.list_memory_files(everything)), before)

        # The operators' reads, page after page.
        [f] = self.c.list_memory_files(people)
        self.assertEqual((f.path, f.size_bytes, f.revision, f.content), ("/memories/people/ann.md", 27, 4, ""))
        full = self.c.files.GetMemoryFile(mf.GetMemoryFileRequest(name=f.name))
        self.assertEqual(full.content, "# Ann\nAnn likes green tea.\n")
        self.assertEqual(kioku.memory_file_name("demo", "ann", f.name.rsplit("/", 1)[1]), f.name)
        revs = list(self.c.list_memory_file_revisions(mf.ListMemoryFileRevisionsRequest(parent=f.name, page_size=1)))
        self.assertEqual(
            [mf.MemoryFileAction.Name(r.action) for r in revs],
            ["MEMORY_FILE_ACTION_RENAMED", "MEMORY_FILE_ACTION_EDITED", "MEMORY_FILE_ACTION_EDITED", "MEMORY_FILE_ACTION_CREATED"],
        )
        self.assertEqual(revs[-1].content, "Ann likes tea.\n")

    def test_another_users_key_reaches_nothing(self):
        self.run_tool({"command": "create", "path": "/memories/secret.md", "file_text": "ann's"})
        with kioku.Client(self.server.target, api_key=self.bob_key) as bob:
            with self.assertRaises(grpc.RpcError) as e:
                bob.run_memory_tool(self.user, {"command": "view", "path": "/memories/secret.md"})
            self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            with self.assertRaises(grpc.RpcError) as e:
                bob.files.ListMemoryFiles(mf.ListMemoryFilesRequest(parent=self.user))
            self.assertEqual(e.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
            own = bob.run_memory_tool(kioku.user_name("demo", "bob"), {"command": "view", "path": "/memories/secret.md"})
            self.assertEqual(own, {"content": "The path /memories/secret.md does not exist. Please provide a valid path.", "is_error": True})


if __name__ == "__main__":
    unittest.main()
