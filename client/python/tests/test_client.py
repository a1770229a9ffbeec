"""The Python client against a real kioku serve: sessions with every state
scope, idempotent appends, paging iterators, watch_session, memories with
wait_operation and retrieval, API key errors, and the package installed
with pip into a new environment outside the repository."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import grpc

import kioku
from kioku.v1 import (
    memory_bank_service_pb2 as mb,
    memory_pb2,
    operation_pb2,
    operation_service_pb2 as ops,
    session_pb2,
    session_service_pb2 as ss,
)

from kioku_server import Kioku, key_file, make_key

server = None


def setUpModule():
    global server
    server = Kioku()


def tearDownModule():
    server.stop()


class Sessions(unittest.TestCase):
    def setUp(self):
        self.c = kioku.Client(server.target)
        self.addCleanup(self.c.close)

    def test_round_trip_with_every_state_scope(self):
        c = self.c
        s = c.sessions.CreateSession(
            ss.CreateSessionRequest(
                parent=kioku.user_name("demo", "ann"),
                session_id="scopes",
                session=session_pb2.Session(display_name="first chat", state=kioku.struct({"mood": "curious"})),
            )
        )
        self.assertEqual(s.name, kioku.session_name("demo", "ann", "scopes"))
        event = session_pb2.Event(
            id="e1",
            author="user",
            content=kioku.text("user", "I prefer tea."),
            actions=session_pb2.EventActions(
                state_delta=kioku.struct({"topic": "tea", "user:drink": "tea", "app:greeting": "hello", "temp:draft": 1})
            ),
        )
        appended = c.sessions.AppendEvent(ss.AppendEventRequest(name=s.name, event=event, expected_sequence=0)).event
        self.assertEqual(appended.sequence, 1)
        self.assertNotIn("temp:draft", appended.actions.state_delta.keys(), "temp: keys are stripped")

        got = c.sessions.GetSession(ss.GetSessionRequest(name=s.name, num_recent_events=10))
        self.assertEqual(
            dict(got.state.items()), {"mood": "curious", "topic": "tea", "user:drink": "tea", "app:greeting": "hello"}
        )
        self.assertEqual(got.events[0].content.parts[0].text, "I prefer tea.")

        # user: and app: reach the user's other sessions; app: other users'.
        s2 = c.sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name("demo", "ann")))
        self.assertEqual(dict(s2.state.items()), {"user:drink": "tea", "app:greeting": "hello"})
        bob = c.sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name("demo", "bob")))
        self.assertEqual(dict(bob.state.items()), {"app:greeting": "hello"})

        # State without a session; None deletes.
        c.sessions.UpdateState(
            ss.UpdateStateRequest(name="apps/demo/users/ann/state", state_delta=kioku.struct({"user:drink": None, "user:nickname": "Annie"}))
        )
        user = c.sessions.GetState(ss.GetStateRequest(name="apps/demo/users/ann/state"))
        self.assertEqual(dict(user.state.items()), {"user:nickname": "Annie"})

        # JSON-ready values: int64 as strings.
        plain = json.loads(json.dumps(kioku.to_dict(got)))
        self.assertEqual(plain["events"][0]["sequence"], "1")
        self.assertEqual(plain["lastSequence"], "1")

    def test_appends_are_idempotent_by_event_id(self):
        c = self.c
        s = c.sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name("demo", "ann"), session_id="retry"))
        request = ss.AppendEventRequest(
            name=s.name, event=session_pb2.Event(id="once", author="user", actions=session_pb2.EventActions(state_delta=kioku.struct({"n": 1})))
        )
        first = c.sessions.AppendEvent(request).event
        retry = c.sessions.AppendEvent(request).event
        self.assertEqual(retry.sequence, first.sequence)
        self.assertEqual(len(list(c.list_events(ss.ListEventsRequest(parent=s.name)))), 1, "the retry stored nothing")

        with self.assertRaises(grpc.RpcError) as e:
            c.sessions.AppendEvent(ss.AppendEventRequest(name=s.name, event=session_pb2.Event(id="once", author="agent")))
        self.assertEqual(e.exception.code(), grpc.StatusCode.ALREADY_EXISTS)
        with self.assertRaises(grpc.RpcError) as e:
            c.sessions.AppendEvent(ss.AppendEventRequest(name=s.name, event=session_pb2.Event(author="user"), expected_sequence=0))
        self.assertEqual(e.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)

    def test_iterators_go_through_every_page(self):
        c = self.c
        parent = kioku.user_name("pages", "ann")
        names = {c.sessions.CreateSession(ss.CreateSessionRequest(parent=parent)).name for _ in range(5)}
        got = [s.name for s in c.list_sessions(ss.ListSessionsRequest(parent=parent, page_size=2))]
        self.assertEqual(sorted(got), sorted(names))
        session = got[0]
        for i in range(5):
            c.sessions.AppendEvent(ss.AppendEventRequest(name=session, event=session_pb2.Event(id=f"e{i}", author="user")))
        events = [e.id for e in c.list_events(ss.ListEventsRequest(parent=session, page_size=2, order_by="sequence desc"))]
        self.assertEqual(events, ["e4", "e3", "e2", "e1", "e0"])

    def test_watch_session_is_a_generator(self):
        c = self.c
        s = c.sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name("demo", "ann"), session_id="watched"))
        c.sessions.AppendEvent(ss.AppendEventRequest(name=s.name, event=session_pb2.Event(id="before", author="user")))

        def append_later():
            time.sleep(0.3)
            for i in (1, 2):
                c.sessions.AppendEvent(ss.AppendEventRequest(name=s.name, event=session_pb2.Event(id=f"during-{i}", author="agent")))

        threading.Thread(target=append_later).start()
        seen = []
        watch = c.watch_session(s.name, after_sequence=0)
        for event in watch:
            seen.append(event.id)
            if len(seen) == 3:
                break
        watch.close()  # cancels the stream
        self.assertEqual(seen, ["before", "during-1", "during-2"])

        # Deleting the session ends a watch.
        ended = []
        t = threading.Thread(target=lambda: ended.extend(e.id for e in c.watch_session(s.name)))
        t.start()
        time.sleep(0.3)
        c.sessions.DeleteSession(ss.DeleteSessionRequest(name=s.name))
        t.join(10)
        self.assertFalse(t.is_alive(), "the watch did not end with the session")
        self.assertEqual(ended, [])

    def test_errors_carry_the_status_code(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.c.sessions.GetSession(ss.GetSessionRequest(name=kioku.session_name("demo", "ann", "missing")))
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(grpc.RpcError) as e:
            list(self.c.list_sessions(ss.ListSessionsRequest(parent=kioku.user_name("demo", "ann"), page_size=-1)))
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("page_size", e.exception.details())


class Memories(unittest.TestCase):
    def setUp(self):
        self.c = kioku.Client(f"http://{server.target}")  # a URL works too
        self.addCleanup(self.c.close)

    def test_direct_memories_wait_and_retrieve(self):
        c = self.c
        scope = {"user_id": "ann"}
        op = c.memories.GenerateMemories(
            mb.GenerateMemoriesRequest(
                parent=kioku.app_name("demo"),
                scope=scope,
                direct_memories_source=mb.DirectMemoriesSource(
                    memories=[mb.DirectMemory(fact="Ann lives in Sapporo."), mb.DirectMemory(fact="Ann prefers green tea.")]
                ),
                metadata={"source": memory_pb2.MetadataValue(string_value="form"), "score": memory_pb2.MetadataValue(double_value=2)},
            )
        )
        done = c.wait_operation(op.name, timeout=20)
        self.assertTrue(done.done)
        result = kioku.generate_result(done)
        self.assertEqual(
            [(g.memory.fact, g.action) for g in result.generated_memories],
            [("Ann lives in Sapporo.", memory_pb2.MEMORY_ACTION_CREATED), ("Ann prefers green tea.", memory_pb2.MEMORY_ACTION_CREATED)],
        )
        # The generation's metadata, with its types (and as text).
        first = result.generated_memories[0].memory
        self.assertEqual(first.typed_metadata["score"].WhichOneof("value"), "double_value")
        self.assertEqual(first.typed_metadata["score"].double_value, 2)
        self.assertEqual(dict(first.metadata), {"source": "form", "score": "2"})
        self.assertEqual(kioku.to_dict(done)["response"]["@type"], "type.googleapis.com/kioku.v1.GenerateMemoriesResponse")

        found = c.memories.RetrieveMemories(
            mb.RetrieveMemoriesRequest(
                parent="apps/demo", scope=scope, similarity_search=mb.SimilaritySearch(query="Where does Ann live?", top_k=1)
            )
        )
        self.assertEqual([r.memory.fact for r in found.retrieved_memories], ["Ann lives in Sapporo."])

        memories = list(c.list_memories(mb.ListMemoriesRequest(parent="apps/demo", scope=scope, page_size=1)))
        self.assertEqual(len(memories), 2)
        revisions = list(c.list_memory_revisions(mb.ListMemoryRevisionsRequest(parent=memories[0].name)))
        self.assertEqual(len(revisions), 1)
        self.assertIn(op.name, [o.name for o in c.list_operations(ops.ListOperationsRequest(parent="apps/demo"))])

        purge = c.memories.PurgeMemories(mb.PurgeMemoriesRequest(parent="apps/demo", scope=scope))
        self.assertEqual(kioku.purge_result(c.wait_operation(purge.name)).purge_count, 2)

    def test_generate_result_raises_a_failed_operation(self):
        failed = operation_pb2.Operation(name="apps/demo/operations/x", done=True, error=operation_pb2.Status(code=9, message="no model"))
        with self.assertRaises(kioku.OperationError) as e:
            kioku.generate_result(failed)
        self.assertEqual(e.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(e.exception.message, "no model")
        with self.assertRaises(ValueError):
            kioku.generate_result(operation_pb2.Operation(name="apps/demo/operations/y"))

    def test_wait_operation_gives_up(self):
        asked = []

        class Stuck:
            def WaitOperation(self, request, timeout=None):
                seconds = request.timeout.ToNanoseconds() / 1e9
                asked.append(seconds)
                time.sleep(seconds)
                return operation_pb2.Operation(name=request.name)

        c = kioku.Client(server.target)
        self.addCleanup(c.close)
        c.operations = Stuck()
        with self.assertRaises(kioku.OperationTimeout):
            c.wait_operation("apps/demo/operations/slow", timeout=0.3)
        self.assertTrue(asked and asked[0] <= 0.3, asked)

    def test_unknown_operation_is_not_found(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.c.wait_operation("apps/demo/operations/none", timeout=1)
        self.assertEqual(e.exception.code(), grpc.StatusCode.NOT_FOUND)


class Keys(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="kioku-py-keys-")
        cls.app_key, app_entry = make_key("demo")
        cls.ann_key, ann_entry = make_key("demo", "ann")
        cls.server = Kioku("--auth-keys", key_file(cls.dir, app_entry, ann_entry))

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def call(self, key, parent):
        with kioku.Client(self.server.target, api_key=key) as c:
            return c.sessions.CreateSession(ss.CreateSessionRequest(parent=parent))

    def assertCode(self, code, key, parent):
        with self.assertRaises(grpc.RpcError) as e:
            self.call(key, parent)
        self.assertEqual(e.exception.code(), code, e.exception.details())

    def test_keys_confine_callers(self):
        self.assertCode(grpc.StatusCode.UNAUTHENTICATED, None, "apps/demo/users/ann")
        self.assertCode(grpc.StatusCode.UNAUTHENTICATED, "kioku_not-a-key", "apps/demo/users/ann")
        self.assertTrue(self.call(self.app_key, "apps/demo/users/bob").name.startswith("apps/demo/users/bob/sessions/"))
        self.assertCode(grpc.StatusCode.PERMISSION_DENIED, self.app_key, "apps/other/users/bob")
        self.assertTrue(self.call(self.ann_key, "apps/demo/users/ann").name.startswith("apps/demo/users/ann/sessions/"))
        self.assertCode(grpc.StatusCode.PERMISSION_DENIED, self.ann_key, "apps/demo/users/bob")

    def test_watch_session_sends_the_key(self):
        with kioku.Client(self.server.target, api_key=self.ann_key) as c:
            s = c.sessions.CreateSession(ss.CreateSessionRequest(parent="apps/demo/users/ann"))
            c.sessions.AppendEvent(ss.AppendEventRequest(name=s.name, event=session_pb2.Event(id="e", author="user")))
            watch = c.watch_session(s.name, after_sequence=0)
            self.assertEqual(next(watch).id, "e")
            watch.close()


class Installed(unittest.TestCase):
    def test_pip_install_then_import_outside_the_repository(self):
        """pip installs the package with the documented command, pip
        install --no-build-isolation (the build backend is the
        interpreter's setuptools, Debian's python3-setuptools, so nothing is
        downloaded; no index here either: its dependencies are the
        interpreter's, Debian's) into a new environment, and a program there
        imports kioku and makes a call."""
        with tempfile.TemporaryDirectory() as tmp:
            # pip builds in the source tree: build a copy.
            package = os.path.join(tmp, "kioku-client")
            shutil.copytree(
                os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                package,
                ignore=shutil.ignore_patterns(".test", "__pycache__", "build", "*.egg-info"),
            )
            env = os.path.join(tmp, "venv")
            # The interpreter's own pip (Debian's python3-pip) installs into
            # the environment, which sees the interpreter's packages.
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", env], check=True)
            python = os.path.join(env, "bin", "python")
            subprocess.run(
                [python, "-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation", package],
                check=True,
                cwd=tmp,
                env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
            )
            program = (
                "import kioku\n"
                "from kioku.v1 import session_service_pb2 as ss\n"
                "with kioku.Client(%r) as c:\n"
                "    s = c.sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name('demo', 'outside')))\n"
                "print(kioku.__file__)\n"
                "print(s.name)\n"
            ) % server.target
            clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            out = subprocess.run([python, "-c", program], cwd=tmp, env=clean, capture_output=True, text=True, check=True).stdout.split()
            self.assertTrue(out[0].startswith(env), f"kioku imported from {out[0]}, not the environment")
            self.assertTrue(out[1].startswith("apps/demo/users/outside/sessions/"), out)


if __name__ == "__main__":
    unittest.main()
