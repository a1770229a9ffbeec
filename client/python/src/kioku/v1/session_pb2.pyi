from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Blob(_message.Message):
    __slots__ = ["data", "display_name", "mime_type"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    display_name: str
    mime_type: str
    def __init__(self, mime_type: _Optional[str] = ..., data: _Optional[bytes] = ..., display_name: _Optional[str] = ...) -> None: ...

class Content(_message.Message):
    __slots__ = ["parts", "role"]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    role: str
    def __init__(self, role: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ["actions", "author", "branch", "citation_metadata", "content", "custom_metadata", "error_code", "error_message", "extensions", "finish_reason", "grounding_metadata", "id", "interrupted", "invocation_id", "long_running_tool_ids", "model_version", "name", "partial", "sequence", "timestamp", "turn_complete", "usage_metadata"]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    CITATION_METADATA_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    GROUNDING_METADATA_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    INVOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    LONG_RUNNING_TOOL_IDS_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TURN_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    USAGE_METADATA_FIELD_NUMBER: _ClassVar[int]
    actions: EventActions
    author: str
    branch: str
    citation_metadata: _struct_pb2.Struct
    content: Content
    custom_metadata: _struct_pb2.Struct
    error_code: str
    error_message: str
    extensions: _struct_pb2.Struct
    finish_reason: str
    grounding_metadata: _struct_pb2.Struct
    id: str
    interrupted: bool
    invocation_id: str
    long_running_tool_ids: _containers.RepeatedScalarFieldContainer[str]
    model_version: str
    name: str
    partial: bool
    sequence: int
    timestamp: _timestamp_pb2.Timestamp
    turn_complete: bool
    usage_metadata: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., invocation_id: _Optional[str] = ..., author: _Optional[str] = ..., content: _Optional[_Union[Content, _Mapping]] = ..., actions: _Optional[_Union[EventActions, _Mapping]] = ..., timestamp: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., partial: bool = ..., turn_complete: bool = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., custom_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., sequence: _Optional[int] = ..., branch: _Optional[str] = ..., interrupted: bool = ..., long_running_tool_ids: _Optional[_Iterable[str]] = ..., usage_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., grounding_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., citation_metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., finish_reason: _Optional[str] = ..., model_version: _Optional[str] = ..., extensions: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class EventActions(_message.Message):
    __slots__ = ["artifact_delta", "compaction", "escalate", "skip_summarization", "state_delta", "transfer_to_agent"]
    class ArtifactDeltaEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ARTIFACT_DELTA_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_FIELD_NUMBER: _ClassVar[int]
    SKIP_SUMMARIZATION_FIELD_NUMBER: _ClassVar[int]
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_TO_AGENT_FIELD_NUMBER: _ClassVar[int]
    artifact_delta: _containers.ScalarMap[str, int]
    compaction: EventCompaction
    escalate: bool
    skip_summarization: bool
    state_delta: _struct_pb2.Struct
    transfer_to_agent: str
    def __init__(self, state_delta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., artifact_delta: _Optional[_Mapping[str, int]] = ..., transfer_to_agent: _Optional[str] = ..., escalate: bool = ..., skip_summarization: bool = ..., compaction: _Optional[_Union[EventCompaction, _Mapping]] = ...) -> None: ...

class EventCompaction(_message.Message):
    __slots__ = ["end_sequence", "end_time", "model", "prompt_version", "start_sequence", "start_time"]
    END_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    START_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    end_sequence: int
    end_time: _timestamp_pb2.Timestamp
    model: str
    prompt_version: str
    start_sequence: int
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, start_sequence: _Optional[int] = ..., end_sequence: _Optional[int] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., model: _Optional[str] = ..., prompt_version: _Optional[str] = ...) -> None: ...

class FileData(_message.Message):
    __slots__ = ["display_name", "file_uri", "mime_type"]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    FILE_URI_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    display_name: str
    file_uri: str
    mime_type: str
    def __init__(self, mime_type: _Optional[str] = ..., file_uri: _Optional[str] = ..., display_name: _Optional[str] = ...) -> None: ...

class FunctionCall(_message.Message):
    __slots__ = ["args", "id", "name"]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    args: _struct_pb2.Struct
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., args: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class FunctionResponse(_message.Message):
    __slots__ = ["id", "name", "response"]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    response: _struct_pb2.Struct
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., response: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ["extensions", "file_data", "function_call", "function_response", "inline_data", "text", "thought", "thought_signature"]
    EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
    FILE_DATA_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    INLINE_DATA_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    THOUGHT_FIELD_NUMBER: _ClassVar[int]
    THOUGHT_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    extensions: _struct_pb2.Struct
    file_data: FileData
    function_call: FunctionCall
    function_response: FunctionResponse
    inline_data: Blob
    text: str
    thought: bool
    thought_signature: bytes
    def __init__(self, text: _Optional[str] = ..., inline_data: _Optional[_Union[Blob, _Mapping]] = ..., file_data: _Optional[_Union[FileData, _Mapping]] = ..., function_call: _Optional[_Union[FunctionCall, _Mapping]] = ..., function_response: _Optional[_Union[FunctionResponse, _Mapping]] = ..., thought: bool = ..., thought_signature: _Optional[bytes] = ..., extensions: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["create_time", "display_name", "events", "expire_time", "labels", "last_sequence", "name", "state", "ttl", "update_time"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    create_time: _timestamp_pb2.Timestamp
    display_name: str
    events: _containers.RepeatedCompositeFieldContainer[Event]
    expire_time: _timestamp_pb2.Timestamp
    labels: _containers.ScalarMap[str, str]
    last_sequence: int
    name: str
    state: _struct_pb2.Struct
    ttl: _duration_pb2.Duration
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., display_name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., last_sequence: _Optional[int] = ...) -> None: ...

class State(_message.Message):
    __slots__ = ["name", "state", "update_time"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: _struct_pb2.Struct
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
