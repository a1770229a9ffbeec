from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from kioku.v1 import memory_pb2 as _memory_pb2
from kioku.v1 import operation_pb2 as _operation_pb2
from kioku.v1 import session_pb2 as _session_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
WEBHOOK_DELIVERY_STATE_DEAD_LETTERED: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_DELIVERED: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_PENDING: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_SKIPPED: WebhookDeliveryState
WEBHOOK_DELIVERY_STATE_UNSPECIFIED: WebhookDeliveryState

class CreateMemoryRequest(_message.Message):
    __slots__ = ["memory", "memory_id", "parent"]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    memory_id: str
    parent: str
    def __init__(self, parent: _Optional[str] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., memory_id: _Optional[str] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DirectMemoriesSource(_message.Message):
    __slots__ = ["memories", "source"]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[DirectMemory]
    source: _memory_pb2.MemorySource
    def __init__(self, memories: _Optional[_Iterable[_Union[DirectMemory, _Mapping]]] = ..., source: _Optional[_Union[_memory_pb2.MemorySource, _Mapping]] = ...) -> None: ...

class DirectMemory(_message.Message):
    __slots__ = ["fact", "topics"]
    FACT_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    fact: str
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, fact: _Optional[str] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class EventsSource(_message.Message):
    __slots__ = ["events"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_session_pb2.Event]
    def __init__(self, events: _Optional[_Iterable[_Union[_session_pb2.Event, _Mapping]]] = ...) -> None: ...

class GenerateMemoriesRequest(_message.Message):
    __slots__ = ["allowed_topics", "direct_memories_source", "disable_consolidation", "events_source", "metadata", "metadata_merge_strategy", "parent", "scope", "session_source"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _memory_pb2.MetadataValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_memory_pb2.MetadataValue, _Mapping]] = ...) -> None: ...
    class ScopeEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ALLOWED_TOPICS_FIELD_NUMBER: _ClassVar[int]
    DIRECT_MEMORIES_SOURCE_FIELD_NUMBER: _ClassVar[int]
    DISABLE_CONSOLIDATION_FIELD_NUMBER: _ClassVar[int]
    EVENTS_SOURCE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    METADATA_MERGE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_SOURCE_FIELD_NUMBER: _ClassVar[int]
    allowed_topics: _containers.RepeatedScalarFieldContainer[str]
    direct_memories_source: DirectMemoriesSource
    disable_consolidation: bool
    events_source: EventsSource
    metadata: _containers.MessageMap[str, _memory_pb2.MetadataValue]
    metadata_merge_strategy: _memory_pb2.MetadataMergeStrategy
    parent: str
    scope: _containers.ScalarMap[str, str]
    session_source: SessionSource
    def __init__(self, parent: _Optional[str] = ..., scope: _Optional[_Mapping[str, str]] = ..., session_source: _Optional[_Union[SessionSource, _Mapping]] = ..., events_source: _Optional[_Union[EventsSource, _Mapping]] = ..., direct_memories_source: _Optional[_Union[DirectMemoriesSource, _Mapping]] = ..., disable_consolidation: bool = ..., allowed_topics: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Mapping[str, _memory_pb2.MetadataValue]] = ..., metadata_merge_strategy: _Optional[_Union[_memory_pb2.MetadataMergeStrategy, str]] = ...) -> None: ...

class GetMemoryBankConfigRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetQuotaUsageRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ["filter", "memory_types", "page_size", "page_token", "parent", "scope"]
    class ScopeEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILTER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPES_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    filter: str
    memory_types: _containers.RepeatedScalarFieldContainer[_memory_pb2.MemoryType]
    page_size: int
    page_token: str
    parent: str
    scope: _containers.ScalarMap[str, str]
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., scope: _Optional[_Mapping[str, str]] = ..., filter: _Optional[str] = ..., memory_types: _Optional[_Iterable[_Union[_memory_pb2.MemoryType, str]]] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ["memories", "next_page_token"]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListMemoryRevisionsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "parent"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    parent: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoryRevisionsResponse(_message.Message):
    __slots__ = ["memory_revisions", "next_page_token"]
    MEMORY_REVISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memory_revisions: _containers.RepeatedCompositeFieldContainer[_memory_pb2.MemoryRevision]
    next_page_token: str
    def __init__(self, memory_revisions: _Optional[_Iterable[_Union[_memory_pb2.MemoryRevision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListWebhookDeliveriesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "parent", "state"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    parent: str
    state: WebhookDeliveryState
    def __init__(self, parent: _Optional[str] = ..., state: _Optional[_Union[WebhookDeliveryState, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWebhookDeliveriesResponse(_message.Message):
    __slots__ = ["deliveries", "next_page_token"]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    deliveries: _containers.RepeatedCompositeFieldContainer[WebhookDelivery]
    next_page_token: str
    def __init__(self, deliveries: _Optional[_Iterable[_Union[WebhookDelivery, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class MemoryProfile(_message.Message):
    __slots__ = ["memories", "profile", "schema_id"]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    profile: _struct_pb2.Struct
    schema_id: str
    def __init__(self, schema_id: _Optional[str] = ..., profile: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ...) -> None: ...

class PurgeMemoriesRequest(_message.Message):
    __slots__ = ["filter", "force", "parent", "scope"]
    class ScopeEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILTER_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    filter: str
    force: bool
    parent: str
    scope: _containers.ScalarMap[str, str]
    def __init__(self, parent: _Optional[str] = ..., scope: _Optional[_Mapping[str, str]] = ..., filter: _Optional[str] = ..., force: bool = ...) -> None: ...

class QuotaUsage(_message.Message):
    __slots__ = ["day", "generation_quota", "generations", "name", "reset_time", "token_quota", "tokens"]
    DAY_FIELD_NUMBER: _ClassVar[int]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_QUOTA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESET_TIME_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_QUOTA_FIELD_NUMBER: _ClassVar[int]
    day: str
    generation_quota: int
    generations: int
    name: str
    reset_time: _timestamp_pb2.Timestamp
    token_quota: int
    tokens: int
    def __init__(self, name: _Optional[str] = ..., day: _Optional[str] = ..., generations: _Optional[int] = ..., tokens: _Optional[int] = ..., generation_quota: _Optional[int] = ..., token_quota: _Optional[int] = ..., reset_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RedeliverWebhookRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class RetrieveMemoriesRequest(_message.Message):
    __slots__ = ["filter", "memory_types", "parent", "scope", "similarity_search", "simple_retrieval"]
    class ScopeEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    FILTER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPES_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SIMILARITY_SEARCH_FIELD_NUMBER: _ClassVar[int]
    SIMPLE_RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    filter: str
    memory_types: _containers.RepeatedScalarFieldContainer[_memory_pb2.MemoryType]
    parent: str
    scope: _containers.ScalarMap[str, str]
    similarity_search: SimilaritySearch
    simple_retrieval: SimpleRetrieval
    def __init__(self, parent: _Optional[str] = ..., scope: _Optional[_Mapping[str, str]] = ..., similarity_search: _Optional[_Union[SimilaritySearch, _Mapping]] = ..., simple_retrieval: _Optional[_Union[SimpleRetrieval, _Mapping]] = ..., filter: _Optional[str] = ..., memory_types: _Optional[_Iterable[_Union[_memory_pb2.MemoryType, str]]] = ...) -> None: ...

class RetrieveMemoriesResponse(_message.Message):
    __slots__ = ["next_page_token", "retrieved_memories"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RETRIEVED_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    retrieved_memories: _containers.RepeatedCompositeFieldContainer[RetrievedMemory]
    def __init__(self, retrieved_memories: _Optional[_Iterable[_Union[RetrievedMemory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RetrieveProfilesRequest(_message.Message):
    __slots__ = ["parent", "scope"]
    class ScopeEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    parent: str
    scope: _containers.ScalarMap[str, str]
    def __init__(self, parent: _Optional[str] = ..., scope: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RetrieveProfilesResponse(_message.Message):
    __slots__ = ["profiles"]
    class ProfilesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MemoryProfile
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MemoryProfile, _Mapping]] = ...) -> None: ...
    PROFILES_FIELD_NUMBER: _ClassVar[int]
    profiles: _containers.MessageMap[str, MemoryProfile]
    def __init__(self, profiles: _Optional[_Mapping[str, MemoryProfile]] = ...) -> None: ...

class RetrievedMemory(_message.Message):
    __slots__ = ["distance", "memory"]
    DISTANCE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    distance: float
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., distance: _Optional[float] = ...) -> None: ...

class RollbackMemoryRequest(_message.Message):
    __slots__ = ["name", "target_revision_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TARGET_REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    target_revision_id: str
    def __init__(self, name: _Optional[str] = ..., target_revision_id: _Optional[str] = ...) -> None: ...

class SessionSource(_message.Message):
    __slots__ = ["end_time", "session", "start_time"]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    end_time: _timestamp_pb2.Timestamp
    session: str
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, session: _Optional[str] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SimilaritySearch(_message.Message):
    __slots__ = ["prefer_time", "query", "top_k"]
    PREFER_TIME_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    prefer_time: TimeRange
    query: str
    top_k: int
    def __init__(self, query: _Optional[str] = ..., top_k: _Optional[int] = ..., prefer_time: _Optional[_Union[TimeRange, _Mapping]] = ...) -> None: ...

class SimpleRetrieval(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class TimeRange(_message.Message):
    __slots__ = ["end_time", "start_time"]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    end_time: _timestamp_pb2.Timestamp
    start_time: _timestamp_pb2.Timestamp
    def __init__(self, start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UpdateMemoryBankConfigRequest(_message.Message):
    __slots__ = ["memory_bank_config", "update_mask"]
    MEMORY_BANK_CONFIG_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    memory_bank_config: _memory_pb2.MemoryBankConfig
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, memory_bank_config: _Optional[_Union[_memory_pb2.MemoryBankConfig, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateMemoryRequest(_message.Message):
    __slots__ = ["memory", "update_mask"]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class WatchMemoriesRequest(_message.Message):
    __slots__ = ["parent", "scope", "start_cursor"]
    class ScopeEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PARENT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    START_CURSOR_FIELD_NUMBER: _ClassVar[int]
    parent: str
    scope: _containers.ScalarMap[str, str]
    start_cursor: str
    def __init__(self, parent: _Optional[str] = ..., scope: _Optional[_Mapping[str, str]] = ..., start_cursor: _Optional[str] = ...) -> None: ...

class WatchMemoriesResponse(_message.Message):
    __slots__ = ["action", "change_time", "cursor", "memory", "operation", "revision"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CHANGE_TIME_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    action: _memory_pb2.MemoryAction
    change_time: _timestamp_pb2.Timestamp
    cursor: str
    memory: _memory_pb2.Memory
    operation: str
    revision: str
    def __init__(self, action: _Optional[_Union[_memory_pb2.MemoryAction, str]] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., revision: _Optional[str] = ..., operation: _Optional[str] = ..., cursor: _Optional[str] = ..., change_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WebhookAttempt(_message.Message):
    __slots__ = ["duration", "error", "status_code", "time"]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    duration: _duration_pb2.Duration
    error: str
    status_code: int
    time: _timestamp_pb2.Timestamp
    def __init__(self, time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., status_code: _Optional[int] = ..., error: _Optional[str] = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WebhookDelivery(_message.Message):
    __slots__ = ["attempt_count", "attempts", "event_time", "memory", "name", "next_attempt_time", "revision", "state", "type", "url", "webhook_id"]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEXT_ATTEMPT_TIME_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    WEBHOOK_ID_FIELD_NUMBER: _ClassVar[int]
    attempt_count: int
    attempts: _containers.RepeatedCompositeFieldContainer[WebhookAttempt]
    event_time: _timestamp_pb2.Timestamp
    memory: str
    name: str
    next_attempt_time: _timestamp_pb2.Timestamp
    revision: int
    state: WebhookDeliveryState
    type: str
    url: str
    webhook_id: str
    def __init__(self, name: _Optional[str] = ..., webhook_id: _Optional[str] = ..., url: _Optional[str] = ..., type: _Optional[str] = ..., memory: _Optional[str] = ..., revision: _Optional[int] = ..., state: _Optional[_Union[WebhookDeliveryState, str]] = ..., event_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., next_attempt_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., attempts: _Optional[_Iterable[_Union[WebhookAttempt, _Mapping]]] = ..., attempt_count: _Optional[int] = ...) -> None: ...

class WebhookDeliveryState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
