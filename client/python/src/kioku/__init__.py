"""kioku's Python client: gRPC stubs of the kioku.v1 API and a small Client.

    import kioku
    from kioku.v1 import session_service_pb2 as ss

    with kioku.Client("127.0.0.1:8080", api_key=None) as c:
        s = c.sessions.CreateSession(ss.CreateSessionRequest(
            parent=kioku.user_name("demo", "ann"),
            session=kioku.session_pb2.Session(state=kioku.struct({"mood": "curious"}))))
        for event in c.watch_session(s.name, after_sequence=0):
            ...

The generated modules are in kioku.v1 (session_pb2, session_service_pb2,
memory_pb2, memory_bank_service_pb2, operation_pb2, operation_service_pb2,
memory_file_service_pb2, block_service_pb2 and the *_pb2_grpc service
stubs). Client holds one channel with the service stubs (sessions,
memories, operations, files, blocks) and
adds what a program needs around them: iterators over every List method,
watch_session as a generator, wait_operation, run_memory_tool (a Claude
memory tool_use input in, the tool_result's content and is_error out), the
API key on every call, and retries of the calls safe to repeat
(RetryPolicy). Errors are grpc.RpcError with the server's status code.
"""

from kioku._client import (
    Client,
    OperationError,
    OperationTimeout,
    RetryPolicy,
    app_name,
    generate_result,
    memory_file_name,
    memory_name,
    new_event_id,
    purge_result,
    session_name,
    struct,
    text,
    to_dict,
    user_name,
)
from kioku.v1 import (
    block_service_pb2,
    memory_bank_service_pb2,
    memory_file_service_pb2,
    memory_pb2,
    operation_pb2,
    operation_service_pb2,
    session_pb2,
    session_service_pb2,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "OperationError",
    "OperationTimeout",
    "RetryPolicy",
    "app_name",
    "block_service_pb2",
    "generate_result",
    "memory_bank_service_pb2",
    "memory_file_name",
    "memory_file_service_pb2",
    "memory_name",
    "memory_pb2",
    "new_event_id",
    "operation_pb2",
    "operation_service_pb2",
    "purge_result",
    "session_name",
    "session_pb2",
    "session_service_pb2",
    "struct",
    "text",
    "to_dict",
    "user_name",
]
