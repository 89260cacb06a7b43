from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class A2aPeer(_message.Message):
    __slots__ = ["headers", "name", "url"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    headers: _containers.ScalarMap[str, str]
    name: str
    url: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class A2aPeerInfo(_message.Message):
    __slots__ = ["header_names", "name", "url"]
    HEADER_NAMES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    header_names: _containers.RepeatedScalarFieldContainer[str]
    name: str
    url: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., header_names: _Optional[_Iterable[str]] = ...) -> None: ...

class A2aPeerList(_message.Message):
    __slots__ = ["peers"]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    peers: _containers.RepeatedCompositeFieldContainer[A2aPeer]
    def __init__(self, peers: _Optional[_Iterable[_Union[A2aPeer, _Mapping]]] = ...) -> None: ...

class McpServer(_message.Message):
    __slots__ = ["headers", "name", "url"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    headers: _containers.ScalarMap[str, str]
    name: str
    url: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ...) -> None: ...

class McpServerInfo(_message.Message):
    __slots__ = ["header_names", "name", "url"]
    HEADER_NAMES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    header_names: _containers.RepeatedScalarFieldContainer[str]
    name: str
    url: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., header_names: _Optional[_Iterable[str]] = ...) -> None: ...

class McpServerList(_message.Message):
    __slots__ = ["servers"]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[McpServer]
    def __init__(self, servers: _Optional[_Iterable[_Union[McpServer, _Mapping]]] = ...) -> None: ...

class ToolAxisOverride(_message.Message):
    __slots__ = ["effect", "egress", "irreversibility", "tool"]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    EGRESS_FIELD_NUMBER: _ClassVar[int]
    IRREVERSIBILITY_FIELD_NUMBER: _ClassVar[int]
    TOOL_FIELD_NUMBER: _ClassVar[int]
    effect: str
    egress: bool
    irreversibility: str
    tool: str
    def __init__(self, tool: _Optional[str] = ..., egress: bool = ..., effect: _Optional[str] = ..., irreversibility: _Optional[str] = ...) -> None: ...
