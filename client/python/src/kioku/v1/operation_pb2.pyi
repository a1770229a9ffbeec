from google.protobuf import any_pb2 as _any_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
OPERATION_STATE_CANCELLED: OperationState
OPERATION_STATE_FAILED: OperationState
OPERATION_STATE_PENDING: OperationState
OPERATION_STATE_RUNNING: OperationState
OPERATION_STATE_SUCCEEDED: OperationState
OPERATION_STATE_UNSPECIFIED: OperationState

class Operation(_message.Message):
    __slots__ = ["done", "error", "metadata", "name", "response"]
    DONE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    done: bool
    error: Status
    metadata: _any_pb2.Any
    name: str
    response: _any_pb2.Any
    def __init__(self, name: _Optional[str] = ..., metadata: _Optional[_Union[_any_pb2.Any, _Mapping]] = ..., done: bool = ..., error: _Optional[_Union[Status, _Mapping]] = ..., response: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class OperationMetadata(_message.Message):
    __slots__ = ["attempt", "coalesced_operations", "consolidation_duration", "create_time", "end_time", "events_processed", "extraction_duration", "facts_extracted", "method", "model_calls", "progress_message", "start_time", "state"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    COALESCED_OPERATIONS_FIELD_NUMBER: _ClassVar[int]
    CONSOLIDATION_DURATION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    EVENTS_PROCESSED_FIELD_NUMBER: _ClassVar[int]
    EXTRACTION_DURATION_FIELD_NUMBER: _ClassVar[int]
    FACTS_EXTRACTED_FIELD_NUMBER: _ClassVar[int]
    METHOD_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    coalesced_operations: _containers.RepeatedScalarFieldContainer[str]
    consolidation_duration: _duration_pb2.Duration
    create_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    events_processed: int
    extraction_duration: _duration_pb2.Duration
    facts_extracted: int
    method: str
    model_calls: int
    progress_message: str
    start_time: _timestamp_pb2.Timestamp
    state: OperationState
    def __init__(self, state: _Optional[_Union[OperationState, str]] = ..., method: _Optional[str] = ..., progress_message: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., attempt: _Optional[int] = ..., model_calls: _Optional[int] = ..., events_processed: _Optional[int] = ..., facts_extracted: _Optional[int] = ..., extraction_duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., consolidation_duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., coalesced_operations: _Optional[_Iterable[str]] = ...) -> None: ...

class Status(_message.Message):
    __slots__ = ["code", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class OperationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
