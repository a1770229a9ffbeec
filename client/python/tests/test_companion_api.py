"""The example FastAPI backend (examples/companion_api.py) driven through
FastAPI's TestClient against a real kioku serve: what its endpoints store is
read back from kioku itself."""

import os
import sys
import unittest

from fastapi.testclient import TestClient

import kioku
from kioku.v1 import memory_bank_service_pb2 as mb, session_service_pb2 as ss

from kioku_server import Kioku

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
import companion_api  # noqa: E402 (the examples are not a package)

server = None


def setUpModule():
    global server
    server = Kioku()


def tearDownModule():
    server.stop()


class CompanionAPI(unittest.TestCase):
    def setUp(self):
        self.kioku = kioku.Client(server.target)
        self.addCleanup(self.kioku.close)
        self.http = TestClient(companion_api.create_app(target=server.target, app="web"))
        self.http.__enter__()  # runs the app's startup and, at cleanup, its shutdown
        self.addCleanup(self.http.__exit__, None, None, None)

    def test_a_conversation_is_stored_in_kioku(self):
        r = self.http.post("/users/ann/conversations")
        self.assertEqual(r.status_code, 201, r.text)
        conversation = r.json()["id"]
        name = kioku.session_name("web", "ann", conversation)
        self.assertEqual(self.kioku.sessions.GetSession(ss.GetSessionRequest(name=name)).name, name)

        path = f"/users/ann/conversations/{conversation}/messages"
        first = self.http.post(path, json={"id": "m-1", "text": "I moved to Sapporo."})
        self.assertEqual(first.status_code, 200, first.text)
        want = [
            {"id": "m-1", "author": "user", "text": "I moved to Sapporo."},
            {"id": "m-1.reply", "author": "companion", "text": "You said: I moved to Sapporo."},
        ]
        self.assertEqual(first.json()["messages"], want)
        # A retry of the same post stores nothing twice.
        retry = self.http.post(path, json={"id": "m-1", "text": "I moved to Sapporo."})
        self.assertEqual(retry.json(), first.json())
        self.http.post(path, json={"id": "m-2", "text": "Good night."})

        events = list(self.kioku.list_events(ss.ListEventsRequest(parent=name)))
        self.assertEqual([(e.id, e.sequence) for e in events], [("m-1", 1), ("m-1.reply", 2), ("m-2", 3), ("m-2.reply", 4)])
        self.assertEqual(events[0].content.parts[0].text, "I moved to Sapporo.")

        got = self.http.get(f"/users/ann/conversations/{conversation}")
        self.assertEqual(got.status_code, 200, got.text)
        self.assertEqual([m["id"] for m in got.json()["messages"]], ["m-1", "m-1.reply", "m-2", "m-2.reply"])
        self.assertEqual(got.json()["messages"][:2], want)

        # The same id with other text is a conflict, and nothing changes.
        clash = self.http.post(path, json={"id": "m-1", "text": "I moved to Osaka."})
        self.assertEqual(clash.status_code, 409, clash.text)
        self.assertIn("m-1", clash.json()["detail"])
        self.assertEqual(len(list(self.kioku.list_events(ss.ListEventsRequest(parent=name)))), 4)

    def test_kioku_errors_are_http_statuses(self):
        for method, path, body in [
            ("GET", "/users/ann/conversations/none", None),
            ("POST", "/users/ann/conversations/none/messages", {"id": "m-1", "text": "hello"}),
        ]:
            r = self.http.request(method, path, json=body)
            self.assertEqual(r.status_code, 404, f"{method} {path}: {r.text}")
            self.assertIn("none", r.json()["detail"])
        # Another user's conversation is not found either.
        conversation = self.http.post("/users/ann/conversations").json()["id"]
        self.assertEqual(self.http.get(f"/users/bob/conversations/{conversation}").status_code, 404)

        bad = self.http.post("/users/-ann/conversations")
        self.assertEqual(bad.status_code, 400, bad.text)
        self.assertIn("-ann", bad.json()["detail"])
        bad = self.http.post(f"/users/ann/conversations/{conversation}/messages", json={"id": "m 1", "text": "hi"})
        self.assertEqual(bad.status_code, 400, bad.text)
        self.assertIn("event.id", bad.json()["detail"])
        self.assertEqual(self.http.post(f"/users/ann/conversations/{conversation}/messages", json={"text": "hi"}).status_code, 422)

    def test_memories_relevant_to_a_query(self):
        op = self.kioku.memories.GenerateMemories(
            mb.GenerateMemoriesRequest(
                parent=kioku.app_name("web"),
                scope={"user_id": "ann"},
                direct_memories_source=mb.DirectMemoriesSource(
                    memories=[mb.DirectMemory(fact="Ann lives in Sapporo."), mb.DirectMemory(fact="Ann prefers green tea.")]
                ),
            )
        )
        kioku.generate_result(self.kioku.wait_operation(op.name, timeout=20))

        r = self.http.get("/users/ann/memories", params={"q": "What tea does Ann like?", "top_k": 1})
        self.assertEqual(r.status_code, 200, r.text)
        self.assertEqual([m["fact"] for m in r.json()["memories"]], ["Ann prefers green tea."])
        both = self.http.get("/users/ann/memories", params={"q": "Ann"}).json()["memories"]
        self.assertEqual(sorted(m["fact"] for m in both), ["Ann lives in Sapporo.", "Ann prefers green tea."])
        # Memories are the user's own.
        self.assertEqual(self.http.get("/users/bob/memories", params={"q": "tea"}).json(), {"memories": []})
        self.assertEqual(self.http.get("/users/ann/memories").status_code, 422, "q is required")


if __name__ == "__main__":
    unittest.main()
