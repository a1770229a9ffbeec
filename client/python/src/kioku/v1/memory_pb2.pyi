from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from kioku.v1 import session_pb2 as _session_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
FUSION_METHOD_RRF: FusionMethod
FUSION_METHOD_UNSPECIFIED: FusionMethod
FUSION_METHOD_WEIGHTED: FusionMethod
MEMORY_ACTION_CREATED: MemoryAction
MEMORY_ACTION_DELETED: MemoryAction
MEMORY_ACTION_UNCHANGED: MemoryAction
MEMORY_ACTION_UNSPECIFIED: MemoryAction
MEMORY_ACTION_UPDATED: MemoryAction
MEMORY_TYPE_NATURAL_LANGUAGE_COLLECTION: MemoryType
MEMORY_TYPE_STRUCTURED_PROFILE: MemoryType
MEMORY_TYPE_UNSPECIFIED: MemoryType
METADATA_MERGE_STRATEGY_MERGE: MetadataMergeStrategy
METADATA_MERGE_STRATEGY_OVERWRITE: MetadataMergeStrategy
METADATA_MERGE_STRATEGY_REQUIRE_EXACT_MATCH: MetadataMergeStrategy
METADATA_MERGE_STRATEGY_UNSPECIFIED: MetadataMergeStrategy

class CompactionTrigger(_message.Message):
    __slots__ = ["event_bytes", "event_count", "keep_recent_events"]
    EVENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    KEEP_RECENT_EVENTS_FIELD_NUMBER: _ClassVar[int]
    event_bytes: int
    event_count: int
    keep_recent_events: int
    def __init__(self, event_count: _Optional[int] = ..., event_bytes: _Optional[int] = ..., keep_recent_events: _Optional[int] = ...) -> None: ...

class CustomMemoryTopic(_message.Message):
    __slots__ = ["description", "label"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    description: str
    label: str
    def __init__(self, label: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class FusionConfig(_message.Message):
    __slots__ = ["dense_weight", "lexical_weight", "method", "rrf_k"]
    DENSE_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    RRF_K_FIELD_NUMBER: _ClassVar[int]
    dense_weight: float
    lexical_weight: float
    method: FusionMethod
    rrf_k: int
    def __init__(self, method: _Optional[_Union[FusionMethod, str]] = ..., dense_weight: _Optional[float] = ..., lexical_weight: _Optional[float] = ..., rrf_k: _Optional[int] = ...) -> None: ...

class GenerateMemoriesResponse(_message.Message):
    __slots__ = ["generated_memories"]
    GENERATED_MEMORIES_FIELD_NUMBER: _ClassVar[int]
    generated_memories: _containers.RepeatedCompositeFieldContainer[GeneratedMemory]
    def __init__(self, generated_memories: _Optional[_Iterable[_Union[GeneratedMemory, _Mapping]]] = ...) -> None: ...

class GeneratedMemory(_message.Message):
    __slots__ = ["action", "memory"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    action: MemoryAction
    memory: Memory
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., action: _Optional[_Union[MemoryAction, str]] = ...) -> None: ...

class GenerationExample(_message.Message):
    __slots__ = ["events", "expected_facts"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FACTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_session_pb2.Event]
    expected_facts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, events: _Optional[_Iterable[_Union[_session_pb2.Event, _Mapping]]] = ..., expected_facts: _Optional[_Iterable[str]] = ...) -> None: ...

class GenerationTrigger(_message.Message):
    __slots__ = ["event_count", "idle_duration"]
    EVENT_COUNT_FIELD_NUMBER: _ClassVar[int]
    IDLE_DURATION_FIELD_NUMBER: _ClassVar[int]
    event_count: int
    idle_duration: _duration_pb2.Duration
    def __init__(self, event_count: _Optional[int] = ..., idle_duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ["create_time", "description", "display_name", "event_time", "expire_time", "fact", "memory_type", "metadata", "name", "profile", "revision_id", "scope", "sources", "stated_time", "topics", "ttl", "typed_metadata", "update_time"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ScopeEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TypedMetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MetadataValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MetadataValue, _Mapping]] = ...) -> None: ...
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    FACT_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TYPE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    STATED_TIME_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    TYPED_METADATA_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    create_time: _timestamp_pb2.Timestamp
    description: str
    display_name: str
    event_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    fact: str
    memory_type: MemoryType
    metadata: _containers.ScalarMap[str, str]
    name: str
    profile: ProfileField
    revision_id: str
    scope: _containers.ScalarMap[str, str]
    sources: _containers.RepeatedCompositeFieldContainer[MemorySource]
    stated_time: _timestamp_pb2.Timestamp
    topics: _containers.RepeatedScalarFieldContainer[str]
    ttl: _duration_pb2.Duration
    typed_metadata: _containers.MessageMap[str, MetadataValue]
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., fact: _Optional[str] = ..., scope: _Optional[_Mapping[str, str]] = ..., topics: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., typed_metadata: _Optional[_Mapping[str, MetadataValue]] = ..., display_name: _Optional[str] = ..., description: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., sources: _Optional[_Iterable[_Union[MemorySource, _Mapping]]] = ..., revision_id: _Optional[str] = ..., event_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., stated_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., memory_type: _Optional[_Union[MemoryType, str]] = ..., profile: _Optional[_Union[ProfileField, _Mapping]] = ...) -> None: ...

class MemoryBankConfig(_message.Message):
    __slots__ = ["compaction_trigger", "custom_topics", "generation_examples", "generation_trigger", "managed_topics", "memory_ttl", "name", "pii_redaction", "profile_schemas", "retrieval", "revision_ttl", "update_time", "webhooks"]
    COMPACTION_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_TOPICS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_TRIGGER_FIELD_NUMBER: _ClassVar[int]
    MANAGED_TOPICS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_TTL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PII_REDACTION_FIELD_NUMBER: _ClassVar[int]
    PROFILE_SCHEMAS_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_FIELD_NUMBER: _ClassVar[int]
    REVISION_TTL_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    WEBHOOKS_FIELD_NUMBER: _ClassVar[int]
    compaction_trigger: CompactionTrigger
    custom_topics: _containers.RepeatedCompositeFieldContainer[CustomMemoryTopic]
    generation_examples: _containers.RepeatedCompositeFieldContainer[GenerationExample]
    generation_trigger: GenerationTrigger
    managed_topics: _containers.RepeatedScalarFieldContainer[str]
    memory_ttl: _duration_pb2.Duration
    name: str
    pii_redaction: PiiRedaction
    profile_schemas: _containers.RepeatedCompositeFieldContainer[ProfileSchemaConfig]
    retrieval: RetrievalConfig
    revision_ttl: _duration_pb2.Duration
    update_time: _timestamp_pb2.Timestamp
    webhooks: _containers.RepeatedCompositeFieldContainer[Webhook]
    def __init__(self, name: _Optional[str] = ..., managed_topics: _Optional[_Iterable[str]] = ..., custom_topics: _Optional[_Iterable[_Union[CustomMemoryTopic, _Mapping]]] = ..., generation_examples: _Optional[_Iterable[_Union[GenerationExample, _Mapping]]] = ..., memory_ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., revision_ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., generation_trigger: _Optional[_Union[GenerationTrigger, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., retrieval: _Optional[_Union[RetrievalConfig, _Mapping]] = ..., compaction_trigger: _Optional[_Union[CompactionTrigger, _Mapping]] = ..., pii_redaction: _Optional[_Union[PiiRedaction, _Mapping]] = ..., profile_schemas: _Optional[_Iterable[_Union[ProfileSchemaConfig, _Mapping]]] = ..., webhooks: _Optional[_Iterable[_Union[Webhook, _Mapping]]] = ...) -> None: ...

class MemoryRevision(_message.Message):
    __slots__ = ["action", "create_time", "event_time", "expire_time", "extracted_facts", "fact", "metadata", "name", "operation", "profile", "reason", "scope", "sources", "stated_time", "topics", "typed_metadata"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ScopeEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TypedMetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: MetadataValue
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[MetadataValue, _Mapping]] = ...) -> None: ...
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    EXTRACTED_FACTS_FIELD_NUMBER: _ClassVar[int]
    FACT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    STATED_TIME_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TYPED_METADATA_FIELD_NUMBER: _ClassVar[int]
    action: MemoryAction
    create_time: _timestamp_pb2.Timestamp
    event_time: _timestamp_pb2.Timestamp
    expire_time: _timestamp_pb2.Timestamp
    extracted_facts: _containers.RepeatedScalarFieldContainer[str]
    fact: str
    metadata: _containers.ScalarMap[str, str]
    name: str
    operation: str
    profile: ProfileField
    reason: str
    scope: _containers.ScalarMap[str, str]
    sources: _containers.RepeatedCompositeFieldContainer[MemorySource]
    stated_time: _timestamp_pb2.Timestamp
    topics: _containers.RepeatedScalarFieldContainer[str]
    typed_metadata: _containers.MessageMap[str, MetadataValue]
    def __init__(self, name: _Optional[str] = ..., action: _Optional[_Union[MemoryAction, str]] = ..., fact: _Optional[str] = ..., scope: _Optional[_Mapping[str, str]] = ..., topics: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Mapping[str, str]] = ..., extracted_facts: _Optional[_Iterable[str]] = ..., sources: _Optional[_Iterable[_Union[MemorySource, _Mapping]]] = ..., operation: _Optional[str] = ..., reason: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., event_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., stated_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., typed_metadata: _Optional[_Mapping[str, MetadataValue]] = ..., profile: _Optional[_Union[ProfileField, _Mapping]] = ...) -> None: ...

class MemorySource(_message.Message):
    __slots__ = ["event_ids", "session"]
    EVENT_IDS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    event_ids: _containers.RepeatedScalarFieldContainer[str]
    session: str
    def __init__(self, session: _Optional[str] = ..., event_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class MetadataValue(_message.Message):
    __slots__ = ["bool_value", "double_value", "string_value", "timestamp_value"]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_VALUE_FIELD_NUMBER: _ClassVar[int]
    bool_value: bool
    double_value: float
    string_value: str
    timestamp_value: _timestamp_pb2.Timestamp
    def __init__(self, string_value: _Optional[str] = ..., double_value: _Optional[float] = ..., bool_value: bool = ..., timestamp_value: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class PiiPattern(_message.Message):
    __slots__ = ["name", "regex"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    name: str
    regex: str
    def __init__(self, name: _Optional[str] = ..., regex: _Optional[str] = ...) -> None: ...

class PiiRedaction(_message.Message):
    __slots__ = ["categories", "custom_patterns", "enabled"]
    CATEGORIES_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_PATTERNS_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    categories: _containers.RepeatedScalarFieldContainer[str]
    custom_patterns: _containers.RepeatedCompositeFieldContainer[PiiPattern]
    enabled: bool
    def __init__(self, enabled: bool = ..., categories: _Optional[_Iterable[str]] = ..., custom_patterns: _Optional[_Iterable[_Union[PiiPattern, _Mapping]]] = ...) -> None: ...

class ProfileField(_message.Message):
    __slots__ = ["field", "schema_id", "value"]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    field: str
    schema_id: str
    value: _struct_pb2.Value
    def __init__(self, schema_id: _Optional[str] = ..., field: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ProfileSchemaConfig(_message.Message):
    __slots__ = ["json_schema", "schema_id", "scope_keys"]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_KEYS_FIELD_NUMBER: _ClassVar[int]
    json_schema: _struct_pb2.Struct
    schema_id: str
    scope_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, schema_id: _Optional[str] = ..., json_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., scope_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class PurgeMemoriesResponse(_message.Message):
    __slots__ = ["purge_count"]
    PURGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    purge_count: int
    def __init__(self, purge_count: _Optional[int] = ...) -> None: ...

class RetrievalConfig(_message.Message):
    __slots__ = ["fusion"]
    FUSION_FIELD_NUMBER: _ClassVar[int]
    fusion: FusionConfig
    def __init__(self, fusion: _Optional[_Union[FusionConfig, _Mapping]] = ...) -> None: ...

class Webhook(_message.Message):
    __slots__ = ["events", "include_fact", "secret", "url"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FACT_FIELD_NUMBER: _ClassVar[int]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedScalarFieldContainer[str]
    include_fact: bool
    secret: str
    url: str
    def __init__(self, url: _Optional[str] = ..., secret: _Optional[str] = ..., events: _Optional[_Iterable[str]] = ..., include_fact: bool = ...) -> None: ...

class MemoryType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MetadataMergeStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MemoryAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class FusionMethod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
