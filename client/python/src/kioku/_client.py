"""The Client and the helpers exported by the kioku package."""

import random
import time
import uuid
from urllib.parse import urlparse

import grpc
from google.protobuf import descriptor_pb2, json_format, struct_pb2

from kioku.v1 import (
    auth_service_pb2_grpc,
    block_service_pb2,
    block_service_pb2_grpc,
    memory_bank_service_pb2,
    memory_bank_service_pb2_grpc,
    memory_file_service_pb2,
    memory_file_service_pb2_grpc,
    memory_pb2,
    operation_service_pb2,
    operation_service_pb2_grpc,
    session_pb2,
    session_service_pb2,
    session_service_pb2_grpc,
)


def app_name(app):
    """apps/{app}."""
    return f"apps/{app}"


def user_name(app, user):
    """apps/{app}/users/{user}, the parent of a user's sessions."""
    return f"apps/{app}/users/{user}"


def session_name(app, user, session):
    """apps/{app}/users/{user}/sessions/{session}."""
    return f"apps/{app}/users/{user}/sessions/{session}"


def memory_name(app, memory):
    """apps/{app}/memories/{memory}."""
    return f"apps/{app}/memories/{memory}"


def memory_file_name(app, user, file):
    """apps/{app}/users/{user}/memoryFiles/{file}."""
    return f"apps/{app}/users/{user}/memoryFiles/{file}"


def struct(values):
    """A google.protobuf.Struct of a dict (state, state deltas); None is null,
    which deletes a key in a delta."""
    s = struct_pb2.Struct()
    s.update(values)
    return s


def text(role, message):
    """A Content of one text part, such as text("user", "I prefer tea.")."""
    return session_pb2.Content(role=role, parts=[session_pb2.Part(text=message)])


def to_dict(message):
    """A message as plain JSON-ready Python values, as the server's JSON has it
    (camelCase names, int64 as strings, timestamps as RFC 3339, enums by
    name, an operation's metadata and response with their @type)."""
    return json_format.MessageToDict(message)


class OperationError(Exception):
    """A finished operation that failed: code is a grpc.StatusCode."""

    def __init__(self, name, code, message):
        super().__init__(f"operation {name} failed: {code.name}: {message}")
        self.name = name
        self.code = code
        self.message = message


class OperationTimeout(TimeoutError):
    """An operation still not done when wait_operation gave up."""


_STATUS = {c.value[0]: c for c in grpc.StatusCode}


def _result(op, response_type):
    if not op.done:
        raise ValueError(f"operation {op.name} is not done")
    which = op.WhichOneof("result")
    if which == "error":
        raise OperationError(op.name, _STATUS.get(op.error.code, grpc.StatusCode.UNKNOWN), op.error.message)
    if which != "response":
        raise ValueError(f"operation {op.name} is done without a result")
    response = response_type()
    if not op.response.Unpack(response):
        raise ValueError(f"operation {op.name} answered {op.response.type_url}, not {response_type.DESCRIPTOR.full_name}")
    return response


def generate_result(op):
    """The GenerateMemoriesResponse of a finished GenerateMemories operation:
    each memory created, updated or deleted with its action. A failed
    operation raises OperationError."""
    return _result(op, memory_pb2.GenerateMemoriesResponse)


def purge_result(op):
    """The PurgeMemoriesResponse of a finished PurgeMemories operation."""
    return _result(op, memory_pb2.PurgeMemoriesResponse)


class _Key(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Sends the API key as `authorization: Bearer KEY` on every call."""

    def __init__(self, key):
        self._metadata = ("authorization", f"Bearer {key}")

    def _with_key(self, details):
        # grpc hands interceptors a namedtuple of the call's details.
        metadata = list(details.metadata or []) + [self._metadata]
        return details._replace(metadata=metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._with_key(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._with_key(details), request)


class RetryPolicy:
    """How a Client retries a call that failed for a transient reason: the
    server was unavailable (UNAVAILABLE, as while it restarts, or its store
    cannot be reached or did not confirm a write, or no connection could be
    made) or a concurrent change or a store transaction closed under it won
    (ABORTED).

    Only calls safe to repeat are retried: those the API marks as having no
    side effects (every Get, List, Retrieve and Wait method) and
    AppendEvent, which is idempotent by event id: the client gives every
    event without an id a fresh one (new_event_id) before sending, so a
    retry that reaches a server which already stored the event gets the
    stored event back, and nothing is appended twice. Other calls, and
    streams, fail with the first error.

    A call is made max_attempts times at most; the first wait is
    initial_backoff seconds, each further one doubles up to max_backoff,
    and each is jittered to between half and all of its length. A call's
    timeout covers its attempts and waits. (gRPC's own retry policy cannot
    do this: kioku answers errors with headers, then trailers, which commit
    a gRPC call before its status is known.)
    """

    def __init__(self, max_attempts=5, initial_backoff=0.1, max_backoff=2.0):
        self.max_attempts = max(1, max_attempts)
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff


def new_event_id():
    """A fresh event id (a random UUID), as the client gives to every
    appended event that has none."""
    return str(uuid.uuid4())


def _safe_methods():
    """The full names (/service/method) of the methods without side effects."""
    out = set()
    for module in (session_service_pb2, memory_bank_service_pb2, operation_service_pb2, memory_file_service_pb2, block_service_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for m in service.methods:
                if m.GetOptions().idempotency_level == descriptor_pb2.MethodOptions.NO_SIDE_EFFECTS:
                    out.add(f"/{service.full_name}/{m.name}")
    return frozenset(out)


_SAFE = _safe_methods()
_APPEND = "/kioku.v1.SessionService/AppendEvent"
_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED)


class _Retry(grpc.UnaryUnaryClientInterceptor):
    """Gives appended events ids and retries safe unary calls (RetryPolicy)."""

    def __init__(self, policy):
        self._policy = policy

    def intercept_unary_unary(self, continuation, details, request):
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        safe = method in _SAFE
        if method == _APPEND and request.HasField("event"):
            if not request.event.id:
                request.event.id = new_event_id()
            safe = True
        deadline = None if details.timeout is None else time.monotonic() + details.timeout
        backoff = self._policy.initial_backoff
        attempt = 1
        while True:
            outcome = continuation(details, request)
            if not safe or outcome.code() not in _TRANSIENT or attempt >= self._policy.max_attempts:
                return outcome
            wait = backoff / 2 + random.uniform(0, backoff / 2)
            if deadline is not None:
                if deadline - time.monotonic() <= wait:
                    return outcome
            time.sleep(wait)
            if deadline is not None:
                details = details._replace(timeout=deadline - time.monotonic())
            backoff = min(2 * backoff, self._policy.max_backoff)
            attempt += 1


class Client:
    """A gRPC channel to kioku with the kioku.v1 service stubs.

    target is host:port (plaintext HTTP/2, as `kioku serve` speaks by
    default), http://host:port, or https://host[:port] for a server with
    --tls-cert (the system's roots; pass credentials= for a private CA).
    api_key, when set, goes with every call. Calls safe to repeat are
    retried as retry (a RetryPolicy) says; retry=None turns retries off.
    The stubs (sessions, memories, operations, files, auth) have every method of
    the API; the methods below add iteration, streaming, waiting and the
    memory tool around them.
    """

    def __init__(self, target, api_key=None, *, credentials=None, options=None, retry=RetryPolicy()):
        parsed = urlparse(target if "://" in target else "//" + target)
        address = parsed.netloc or target
        if parsed.scheme == "https" or credentials is not None:
            if ":" not in address:
                address += ":443"
            self.channel = grpc.secure_channel(address, credentials or grpc.ssl_channel_credentials(), options=options)
        else:
            self.channel = grpc.insecure_channel(address, options=options)
        interceptors = []
        if api_key:
            interceptors.append(_Key(api_key))
        if retry is not None:
            interceptors.append(_Retry(retry))
        channel = grpc.intercept_channel(self.channel, *interceptors) if interceptors else self.channel
        self.sessions = session_service_pb2_grpc.SessionServiceStub(channel)
        self.memories = memory_bank_service_pb2_grpc.MemoryBankServiceStub(channel)
        self.operations = operation_service_pb2_grpc.OperationServiceStub(channel)
        self.files = memory_file_service_pb2_grpc.MemoryFileServiceStub(channel)
        self.auth = auth_service_pb2_grpc.AuthServiceStub(channel)
        self.blocks = block_service_pb2_grpc.BlockServiceStub(channel)

    def close(self):
        """Closes the channel."""
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _pages(call, request, field, timeout):
        while True:
            response = call(request, timeout=timeout)
            yield from getattr(response, field)
            if not response.next_page_token:
                return
            request.page_token = response.next_page_token

    def list_sessions(self, request, timeout=None):
        """Every session of a ListSessionsRequest, page after page."""
        return self._pages(self.sessions.ListSessions, _copy(request), "sessions", timeout)

    def list_events(self, request, timeout=None):
        """Every event of a ListEventsRequest, page after page."""
        return self._pages(self.sessions.ListEvents, _copy(request), "events", timeout)

    def list_memories(self, request, timeout=None):
        """Every memory of a ListMemoriesRequest, page after page."""
        return self._pages(self.memories.ListMemories, _copy(request), "memories", timeout)

    def list_memory_revisions(self, request, timeout=None):
        """Every revision of a ListMemoryRevisionsRequest, newest first."""
        return self._pages(self.memories.ListMemoryRevisions, _copy(request), "memory_revisions", timeout)

    def list_operations(self, request, timeout=None):
        """Every operation of a ListOperationsRequest, newest first."""
        return self._pages(self.operations.ListOperations, _copy(request), "operations", timeout)

    def list_memory_files(self, request, timeout=None):
        """Every memory file of a ListMemoryFilesRequest, in path order."""
        return self._pages(self.files.ListMemoryFiles, _copy(request), "memory_files", timeout)

    def list_memory_file_revisions(self, request, timeout=None):
        """Every revision of a ListMemoryFileRevisionsRequest, newest first."""
        return self._pages(self.files.ListMemoryFileRevisions, _copy(request), "memory_file_revisions", timeout)

    def run_memory_tool(self, user, tool_input, timeout=None):
        """Runs one command of Anthropic's memory tool (the input dict of a
        model's `memory` tool_use block) in the user's memory directory
        (user: apps/{app}/users/{user}) and returns the tool_result's
        fields: {"content": the answer, "is_error": whether it reports an
        error}, to send back to the model as they are."""
        response = self.files.Execute(
            memory_file_service_pb2.ExecuteRequest(parent=user, input=struct(tool_input)), timeout=timeout
        )
        return {"content": response.output, "is_error": response.is_error}

    def watch_session(self, name, after_sequence=None):
        """Yields the events appended to a session after the call (or after
        after_sequence: first the stored ones after it). It ends when the
        session is deleted or expires; closing the generator (or leaving a
        for loop over it) cancels the stream."""
        request = session_service_pb2.WatchSessionRequest(name=name)
        if after_sequence is not None:
            request.after_sequence = after_sequence
        stream = self.sessions.WatchSession(request)
        try:
            for response in stream:
                yield response.event
        finally:
            stream.cancel()

    def wait_operation(self, name, timeout=60.0):
        """Waits until the operation is done, with the server's WaitOperation
        (one call a minute at most, no polling), and returns it, failed or
        not. Still running after timeout seconds: OperationTimeout."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(0.0, min(deadline - time.monotonic(), 60.0))
            request = operation_service_pb2.WaitOperationRequest(name=name)
            request.timeout.FromNanoseconds(int(left * 1e9))
            # The call outlives the server's wait, which ends it.
            op = self.operations.WaitOperation(request, timeout=left + 10)
            if op.done:
                return op
            if time.monotonic() >= deadline:
                raise OperationTimeout(f"operation {name} is not done after {timeout} s")


def _copy(request):
    copy = type(request)()
    copy.CopyFrom(request)
    return copy

