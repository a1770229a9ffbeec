from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
MEMORY_FILE_ACTION_CREATED: MemoryFileAction
MEMORY_FILE_ACTION_DELETED: MemoryFileAction
MEMORY_FILE_ACTION_EDITED: MemoryFileAction
MEMORY_FILE_ACTION_RENAMED: MemoryFileAction
MEMORY_FILE_ACTION_UNSPECIFIED: MemoryFileAction

class ExecuteRequest(_message.Message):
    __slots__ = ["input", "parent"]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    input: _struct_pb2.Struct
    parent: str
    def __init__(self, parent: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ["is_error", "output"]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    is_error: bool
    output: str
    def __init__(self, output: _Optional[str] = ..., is_error: bool = ...) -> None: ...

class GetMemoryFileRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListMemoryFileRevisionsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "parent"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    parent: str
    def __init__(self, parent: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoryFileRevisionsResponse(_message.Message):
    __slots__ = ["memory_file_revisions", "next_page_token"]
    MEMORY_FILE_REVISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memory_file_revisions: _containers.RepeatedCompositeFieldContainer[MemoryFileRevision]
    next_page_token: str
    def __init__(self, memory_file_revisions: _Optional[_Iterable[_Union[MemoryFileRevision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListMemoryFilesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "parent", "path", "show_deleted"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SHOW_DELETED_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    parent: str
    path: str
    show_deleted: bool
    def __init__(self, parent: _Optional[str] = ..., path: _Optional[str] = ..., show_deleted: bool = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoryFilesResponse(_message.Message):
    __slots__ = ["memory_files", "next_page_token"]
    MEMORY_FILES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memory_files: _containers.RepeatedCompositeFieldContainer[MemoryFile]
    next_page_token: str
    def __init__(self, memory_files: _Optional[_Iterable[_Union[MemoryFile, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class MemoryFile(_message.Message):
    __slots__ = ["content", "create_time", "deleted", "name", "path", "revision", "size_bytes", "update_time"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    content: str
    create_time: _timestamp_pb2.Timestamp
    deleted: bool
    name: str
    path: str
    revision: int
    size_bytes: int
    update_time: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ..., content: _Optional[str] = ..., size_bytes: _Optional[int] = ..., revision: _Optional[int] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., deleted: bool = ...) -> None: ...

class MemoryFileRevision(_message.Message):
    __slots__ = ["action", "content", "create_time", "name", "path", "size_bytes"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    action: MemoryFileAction
    content: str
    create_time: _timestamp_pb2.Timestamp
    name: str
    path: str
    size_bytes: int
    def __init__(self, name: _Optional[str] = ..., action: _Optional[_Union[MemoryFileAction, str]] = ..., path: _Optional[str] = ..., content: _Optional[str] = ..., size_bytes: _Optional[int] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class MemoryFileAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
