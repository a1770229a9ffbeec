from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from kioku.v1 import memory_pb2 as _memory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

BLOCK_ACTION_APPENDED: BlockAction
BLOCK_ACTION_REPLACED: BlockAction
BLOCK_ACTION_REWRITTEN: BlockAction
BLOCK_ACTION_UNSPECIFIED: BlockAction
BLOCK_ACTION_UPDATED: BlockAction
DESCRIPTOR: _descriptor.FileDescriptor

class AppendToBlockRequest(_message.Message):
    __slots__ = ["content", "name"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    content: str
    name: str
    def __init__(self, name: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...

class Block(_message.Message):
    __slots__ = ["create_time", "description", "label", "limit", "name", "read_only", "revision", "update_time", "value"]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    create_time: _timestamp_pb2.Timestamp
    description: str
    label: str
    limit: int
    name: str
    read_only: bool
    revision: int
    update_time: _timestamp_pb2.Timestamp
    value: str
    def __init__(self, name: _Optional[str] = ..., label: _Optional[str] = ..., value: _Optional[str] = ..., description: _Optional[str] = ..., limit: _Optional[int] = ..., read_only: bool = ..., revision: _Optional[int] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class BlockRevision(_message.Message):
    __slots__ = ["action", "create_time", "description", "limit", "name", "read_only", "sources", "value"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    action: BlockAction
    create_time: _timestamp_pb2.Timestamp
    description: str
    limit: int
    name: str
    read_only: bool
    sources: _containers.RepeatedCompositeFieldContainer[_memory_pb2.MemorySource]
    value: str
    def __init__(self, name: _Optional[str] = ..., action: _Optional[_Union[BlockAction, str]] = ..., value: _Optional[str] = ..., description: _Optional[str] = ..., limit: _Optional[int] = ..., read_only: bool = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., sources: _Optional[_Iterable[_Union[_memory_pb2.MemorySource, _Mapping]]] = ...) -> None: ...

class DeleteBlockRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetBlockRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListBlockRevisionsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "parent"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    parent: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListBlockRevisionsResponse(_message.Message):
    __slots__ = ["block_revisions", "next_page_token"]
    BLOCK_REVISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    block_revisions: _containers.RepeatedCompositeFieldContainer[BlockRevision]
    next_page_token: str
    def __init__(self, block_revisions: _Optional[_Iterable[_Union[BlockRevision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListBlocksRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "parent"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    parent: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListBlocksResponse(_message.Message):
    __slots__ = ["blocks", "next_page_token"]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    blocks: _containers.RepeatedCompositeFieldContainer[Block]
    next_page_token: str
    def __init__(self, blocks: _Optional[_Iterable[_Union[Block, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ReplaceInBlockRequest(_message.Message):
    __slots__ = ["name", "new_content", "old_content"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    NEW_CONTENT_FIELD_NUMBER: _ClassVar[int]
    OLD_CONTENT_FIELD_NUMBER: _ClassVar[int]
    name: str
    new_content: str
    old_content: str
    def __init__(self, name: _Optional[str] = ..., old_content: _Optional[str] = ..., new_content: _Optional[str] = ...) -> None: ...

class RewriteBlocksResponse(_message.Message):
    __slots__ = ["blocks"]
    BLOCKS_FIELD_NUMBER: _ClassVar[int]
    blocks: _containers.RepeatedCompositeFieldContainer[Block]
    def __init__(self, blocks: _Optional[_Iterable[_Union[Block, _Mapping]]] = ...) -> None: ...

class UpdateBlockRequest(_message.Message):
    __slots__ = ["block", "expected_revision"]
    BLOCK_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    block: Block
    expected_revision: int
    def __init__(self, block: _Optional[_Union[Block, _Mapping]] = ..., expected_revision: _Optional[int] = ...) -> None: ...

class BlockAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
