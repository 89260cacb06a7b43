from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
DOCUMENT_FORMAT_JSON: DocumentFormat
DOCUMENT_FORMAT_UNSPECIFIED: DocumentFormat
DOCUMENT_FORMAT_YAML: DocumentFormat
RULE_SEVERITY_ERROR: RuleSeverity
RULE_SEVERITY_UNSPECIFIED: RuleSeverity
RULE_SEVERITY_WARNING: RuleSeverity

class GetRuleRequest(_message.Message):
    __slots__ = ["rule_id"]
    RULE_ID_FIELD_NUMBER: _ClassVar[int]
    rule_id: str
    def __init__(self, rule_id: _Optional[str] = ...) -> None: ...

class GetRuleResponse(_message.Message):
    __slots__ = ["rule"]
    RULE_FIELD_NUMBER: _ClassVar[int]
    rule: Rule
    def __init__(self, rule: _Optional[_Union[Rule, _Mapping]] = ...) -> None: ...

class GetSpecSchemaRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetSpecSchemaResponse(_message.Message):
    __slots__ = ["json_schema"]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    json_schema: str
    def __init__(self, json_schema: _Optional[str] = ...) -> None: ...

class ListRulesRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListRulesResponse(_message.Message):
    __slots__ = ["next_page_token", "rules"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RULES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    rules: _containers.RepeatedCompositeFieldContainer[Rule]
    def __init__(self, rules: _Optional[_Iterable[_Union[Rule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Rule(_message.Message):
    __slots__ = ["description", "failing_example", "rule_id", "scope", "severity", "summary"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    FAILING_EXAMPLE_FIELD_NUMBER: _ClassVar[int]
    RULE_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    description: str
    failing_example: str
    rule_id: str
    scope: str
    severity: RuleSeverity
    summary: str
    def __init__(self, rule_id: _Optional[str] = ..., summary: _Optional[str] = ..., description: _Optional[str] = ..., severity: _Optional[_Union[RuleSeverity, str]] = ..., failing_example: _Optional[str] = ..., scope: _Optional[str] = ...) -> None: ...

class SourcePosition(_message.Message):
    __slots__ = ["column", "line"]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    LINE_FIELD_NUMBER: _ClassVar[int]
    column: int
    line: int
    def __init__(self, line: _Optional[int] = ..., column: _Optional[int] = ...) -> None: ...

class SpecViolation(_message.Message):
    __slots__ = ["message", "path", "position", "rule_id"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    RULE_ID_FIELD_NUMBER: _ClassVar[int]
    message: str
    path: str
    position: SourcePosition
    rule_id: str
    def __init__(self, rule_id: _Optional[str] = ..., path: _Optional[str] = ..., message: _Optional[str] = ..., position: _Optional[_Union[SourcePosition, _Mapping]] = ...) -> None: ...

class SpecViolations(_message.Message):
    __slots__ = ["violations"]
    VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    violations: _containers.RepeatedCompositeFieldContainer[SpecViolation]
    def __init__(self, violations: _Optional[_Iterable[_Union[SpecViolation, _Mapping]]] = ...) -> None: ...

class ValidateSpecRequest(_message.Message):
    __slots__ = ["document", "document_name", "format", "spec", "tenant_max_depth"]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_NAME_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TENANT_MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    document: bytes
    document_name: str
    format: DocumentFormat
    spec: _struct_pb2.Struct
    tenant_max_depth: int
    def __init__(self, spec: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., document: _Optional[bytes] = ..., format: _Optional[_Union[DocumentFormat, str]] = ..., document_name: _Optional[str] = ..., tenant_max_depth: _Optional[int] = ...) -> None: ...

class ValidateSpecResponse(_message.Message):
    __slots__ = ["errors", "kind", "valid", "warnings"]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedCompositeFieldContainer[SpecViolation]
    kind: str
    valid: bool
    warnings: _containers.RepeatedCompositeFieldContainer[SpecViolation]
    def __init__(self, valid: bool = ..., errors: _Optional[_Iterable[_Union[SpecViolation, _Mapping]]] = ..., warnings: _Optional[_Iterable[_Union[SpecViolation, _Mapping]]] = ..., kind: _Optional[str] = ...) -> None: ...

class DocumentFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class RuleSeverity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
