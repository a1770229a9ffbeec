from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from kioku.v1 import operation_pb2 as _operation_pb2
from kioku.v1 import session_pb2 as _session_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
SESSION_VIEW_COMPACTED: SessionView
SESSION_VIEW_FULL: SessionView
SESSION_VIEW_UNSPECIFIED: SessionView

class AppendEventRequest(_message.Message):
    __slots__ = ["event", "expected_sequence", "name"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    event: _session_pb2.Event
    expected_sequence: int
    name: str
    def __init__(self, name: _Optional[str] = ..., event: _Optional[_Union[_session_pb2.Event, _Mapping]] = ..., expected_sequence: _Optional[int] = ...) -> None: ...

class AppendEventResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _session_pb2.Event
    def __init__(self, event: _Optional[_Union[_session_pb2.Event, _Mapping]] = ...) -> None: ...

class CompactSessionRequest(_message.Message):
    __slots__ = ["keep_recent_events", "name", "up_to_sequence"]
    KEEP_RECENT_EVENTS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UP_TO_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    keep_recent_events: int
    name: str
    up_to_sequence: int
    def __init__(self, name: _Optional[str] = ..., up_to_sequence: _Optional[int] = ..., keep_recent_events: _Optional[int] = ...) -> None: ...

class CompactSessionResponse(_message.Message):
    __slots__ = ["compaction", "created"]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    compaction: _session_pb2.Event
    created: bool
    def __init__(self, compaction: _Optional[_Union[_session_pb2.Event, _Mapping]] = ..., created: bool = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["parent", "session", "session_id"]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    parent: str
    session: _session_pb2.Session
    session_id: str
    def __init__(self, parent: _Optional[str] = ..., session_id: _Optional[str] = ..., session: _Optional[_Union[_session_pb2.Session, _Mapping]] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ["allow_missing", "forget_memories", "name"]
    ALLOW_MISSING_FIELD_NUMBER: _ClassVar[int]
    FORGET_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    allow_missing: bool
    forget_memories: bool
    name: str
    def __init__(self, name: _Optional[str] = ..., forget_memories: bool = ..., allow_missing: bool = ...) -> None: ...

class DeleteUserRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteUserResponse(_message.Message):
    __slots__ = ["deleted_blocks", "deleted_memories", "deleted_memory_files", "deleted_operations", "deleted_sessions", "deleted_watermarks"]
    DELETED_BLOCKS_FIELD_NUMBER: _ClassVar[int]
    DELETED_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    DELETED_MEMORY_FILES_FIELD_NUMBER: _ClassVar[int]
    DELETED_OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    DELETED_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    DELETED_WATERMARKS_FIELD_NUMBER: _ClassVar[int]
    deleted_blocks: int
    deleted_memories: int
    deleted_memory_files: int
    deleted_operations: int
    deleted_sessions: int
    deleted_watermarks: int
    def __init__(self, deleted_sessions: _Optional[int] = ..., deleted_memories: _Optional[int] = ..., deleted_watermarks: _Optional[int] = ..., deleted_operations: _Optional[int] = ..., deleted_memory_files: _Optional[int] = ..., deleted_blocks: _Optional[int] = ...) -> None: ...

class ForkSessionRequest(_message.Message):
    __slots__ = ["display_name", "event_id", "name", "session_id"]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    display_name: str
    event_id: str
    name: str
    session_id: str
    def __init__(self, name: _Optional[str] = ..., session_id: _Optional[str] = ..., event_id: _Optional[str] = ..., display_name: _Optional[str] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["after_time", "name", "num_recent_events", "skip_events", "view"]
    AFTER_TIME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_RECENT_EVENTS_FIELD_NUMBER: _ClassVar[int]
    SKIP_EVENTS_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    after_time: _timestamp_pb2.Timestamp
    name: str
    num_recent_events: int
    skip_events: bool
    view: SessionView
    def __init__(self, name: _Optional[str] = ..., num_recent_events: _Optional[int] = ..., after_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., skip_events: bool = ..., view: _Optional[_Union[SessionView, str]] = ...) -> None: ...

class GetStateRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ["end_time", "filter", "order_by", "page_size", "page_token", "parent", "start_time"]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    ORDER_BY_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    end_time: _timestamp_pb2.Timestamp
    filter: str
    order_by: str
    page_size: int
    page_token: str
    parent: str
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., order_by: _Optional[str] = ..., filter: _Optional[str] = ...) -> None: ...

class ListEventsResponse(_message.Message):
    __slots__ = ["events", "next_page_token"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_session_pb2.Event]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[_session_pb2.Event, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["filter", "include_state", "page_size", "page_token", "parent"]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_STATE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    filter: str
    include_state: bool
    page_size: int
    page_token: str
    parent: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., filter: _Optional[str] = ..., include_state: bool = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[_session_pb2.Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[_session_pb2.Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchEventsRequest(_message.Message):
    __slots__ = ["author", "end_time", "page_size", "page_token", "parent", "query", "start_time"]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    author: str
    end_time: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    parent: str
    query: str
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, parent: _Optional[str] = ..., query: _Optional[str] = ..., author: _Optional[str] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class SearchEventsResponse(_message.Message):
    __slots__ = ["next_page_token", "results"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    results: _containers.RepeatedCompositeFieldContainer[SearchEventsResult]
    def __init__(self, results: _Optional[_Iterable[_Union[SearchEventsResult, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchEventsResult(_message.Message):
    __slots__ = ["event", "score", "session"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    event: _session_pb2.Event
    score: float
    session: str
    def __init__(self, event: _Optional[_Union[_session_pb2.Event, _Mapping]] = ..., session: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class UpdateSessionRequest(_message.Message):
    __slots__ = ["session", "update_mask"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    session: _session_pb2.Session
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, session: _Optional[_Union[_session_pb2.Session, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateStateRequest(_message.Message):
    __slots__ = ["name", "state_delta"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    name: str
    state_delta: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., state_delta: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class WatchSessionRequest(_message.Message):
    __slots__ = ["after_sequence", "name"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    name: str
    def __init__(self, name: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class WatchSessionResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _session_pb2.Event
    def __init__(self, event: _Optional[_Union[_session_pb2.Event, _Mapping]] = ...) -> None: ...

class SessionView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
