"""The Python client's retries against a real kioku serve, with faults put in
front of it: a gRPC server that passes every call through to kioku and
answers the first calls of a method with a status of its choosing after
kioku handled them. An append kioku stored but answered UNAVAILABLE or
ABORTED is sent again with the same event id and stored once; INTERNAL and
calls unsafe to repeat are not retried; the attempts are bounded and kept
within the call's timeout."""

import threading
import time
import unittest
from concurrent import futures

import grpc

import kioku
from kioku.v1 import session_service_pb2 as ss

from kioku_server import Kioku

class Front:
    """A gRPC server in front of kioku: fails the first `failures` calls of
    `method` with `code` (after kioku handled them) and records the
    request bytes of each call of it."""

    def __init__(self, target, method, code, failures=1):
        self.calls = []
        self._lock = threading.Lock()
        upstream = grpc.insecure_channel(target)
        self._upstream = upstream

        def handler(details):
            forward = upstream.unary_unary(details.method)

            def call(request, context):
                response = forward(request)
                if details.method == method:
                    with self._lock:
                        self.calls.append(request)
                        fail = len(self.calls) <= failures
                    if fail:
                        context.abort(code, "the write was not confirmed")
                return response

            return grpc.unary_unary_rpc_method_handler(call)

        class Generic(grpc.GenericRpcHandler):
            def service(self, details):
                return handler(details)

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[Generic()])
        port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        self.target = f"127.0.0.1:{port}"

    def stop(self):
        self.server.stop(None)
        self._upstream.close()


FAST = kioku.RetryPolicy(initial_backoff=0.001, max_backoff=0.005)


class Retries(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kioku = Kioku()
        cls.addClassCleanup(cls.kioku.stop)

    def front(self, method, code, failures=1):
        f = Front(self.kioku.target, method, code, failures)
        self.addCleanup(f.stop)
        return f

    def client(self, target, retry=FAST):
        c = kioku.Client(target, retry=retry)
        self.addCleanup(c.close)
        return c

    def test_a_stored_append_is_retried_with_its_id(self):
        for code, attempts in ((grpc.StatusCode.UNAVAILABLE, 2), (grpc.StatusCode.ABORTED, 2), (grpc.StatusCode.INTERNAL, 1)):
            with self.subTest(code=code.name):
                f = self.front("/kioku.v1.SessionService/AppendEvent", code)
                c = self.client(f.target)
                s = c.sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name("retry", "ann"), session_id=code.name.lower()))
                event = kioku.session_pb2.Event(author="user", content=kioku.text("user", "I prefer tea."))
                request = ss.AppendEventRequest(name=s.name, event=event)
                if attempts == 1:
                    with self.assertRaises(grpc.RpcError) as err:
                        c.sessions.AppendEvent(request)
                    self.assertEqual(err.exception.code(), code)
                else:
                    got = c.sessions.AppendEvent(request).event
                    self.assertEqual(got.sequence, 1)
                    self.assertEqual(got.id, request.event.id)
                    self.assertEqual(len(request.event.id), 36, "the client gave the event a UUID")
                self.assertEqual(len(f.calls), attempts)
                self.assertEqual(len(set(f.calls)), 1, "every attempt sends the same request, event id included")
                events = list(c.list_events(ss.ListEventsRequest(parent=s.name)))
                self.assertEqual(len(events), 1, "the event is stored once")

    def test_reads_are_retried_within_bounds(self):
        name = kioku.session_name("retry", "bob", "s")
        self.client(self.kioku.target).sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name("retry", "bob"), session_id="s"))
        get = "/kioku.v1.SessionService/GetSession"
        f = self.front(get, grpc.StatusCode.UNAVAILABLE, 2)
        self.assertEqual(self.client(f.target).sessions.GetSession(ss.GetSessionRequest(name=name)).name, name)
        self.assertEqual(len(f.calls), 3)

        f = self.front(get, grpc.StatusCode.UNAVAILABLE, 10)
        with self.assertRaises(grpc.RpcError) as err:
            self.client(f.target, kioku.RetryPolicy(max_attempts=3, initial_backoff=0.001)).sessions.GetSession(ss.GetSessionRequest(name=name))
        self.assertEqual(err.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(len(f.calls), 3)

        f = self.front(get, grpc.StatusCode.UNAVAILABLE)
        with self.assertRaises(grpc.RpcError):
            self.client(f.target, retry=None).sessions.GetSession(ss.GetSessionRequest(name=name))
        self.assertEqual(len(f.calls), 1, "retry=None turns retries off")

        # The timeout covers the attempts and the waits.
        f = self.front(get, grpc.StatusCode.UNAVAILABLE, 1000)
        start = time.monotonic()
        with self.assertRaises(grpc.RpcError):
            self.client(f.target, kioku.RetryPolicy(max_attempts=1000, initial_backoff=60)).sessions.GetSession(ss.GetSessionRequest(name=name), timeout=0.5)
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(len(f.calls), 1)

    def test_a_call_unsafe_to_repeat_fails_at_once(self):
        f = self.front("/kioku.v1.SessionService/CreateSession", grpc.StatusCode.UNAVAILABLE)
        with self.assertRaises(grpc.RpcError) as err:
            self.client(f.target).sessions.CreateSession(ss.CreateSessionRequest(parent=kioku.user_name("retry", "cy")))
        self.assertEqual(err.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(len(f.calls), 1)

    def test_new_event_id(self):
        self.assertEqual(len({kioku.new_event_id() for _ in range(100)}), 100)


if __name__ == "__main__":
    unittest.main()
