from agentplane.v1 import hitl_pb2 as _hitl_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ApproveDecision(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class EditDecision(_message.Message):
    __slots__ = ["arguments_json", "reason"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    reason: str
    def __init__(self, reason: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class GetInterruptRequest(_message.Message):
    __slots__ = ["interrupt_id"]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    interrupt_id: str
    def __init__(self, interrupt_id: _Optional[str] = ...) -> None: ...

class GetInterruptResponse(_message.Message):
    __slots__ = ["interrupt"]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    interrupt: _hitl_pb2.Interrupt
    def __init__(self, interrupt: _Optional[_Union[_hitl_pb2.Interrupt, _Mapping]] = ...) -> None: ...

class ListAuditRecordsRequest(_message.Message):
    __slots__ = ["interrupt_id", "page_size", "page_token", "since", "task_id"]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    interrupt_id: str
    page_size: int
    page_token: str
    since: _timestamp_pb2.Timestamp
    task_id: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., since: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., interrupt_id: _Optional[str] = ..., task_id: _Optional[str] = ...) -> None: ...

class ListAuditRecordsResponse(_message.Message):
    __slots__ = ["next_page_token", "records"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    records: _containers.RepeatedCompositeFieldContainer[_hitl_pb2.AuditRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[_hitl_pb2.AuditRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListInterruptsRequest(_message.Message):
    __slots__ = ["kinds", "min_age", "page_size", "page_token", "states", "tag", "task_id", "tool_name"]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    MIN_AGE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    kinds: _containers.RepeatedScalarFieldContainer[_hitl_pb2.InterruptKind]
    min_age: _duration_pb2.Duration
    page_size: int
    page_token: str
    states: _containers.RepeatedScalarFieldContainer[_hitl_pb2.InterruptState]
    tag: str
    task_id: str
    tool_name: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., task_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., tag: _Optional[str] = ..., min_age: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., kinds: _Optional[_Iterable[_Union[_hitl_pb2.InterruptKind, str]]] = ..., states: _Optional[_Iterable[_Union[_hitl_pb2.InterruptState, str]]] = ...) -> None: ...

class ListInterruptsResponse(_message.Message):
    __slots__ = ["interrupts", "next_page_token"]
    INTERRUPTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    interrupts: _containers.RepeatedCompositeFieldContainer[_hitl_pb2.Interrupt]
    next_page_token: str
    def __init__(self, interrupts: _Optional[_Iterable[_Union[_hitl_pb2.Interrupt, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RejectDecision(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ResolveInterruptRequest(_message.Message):
    __slots__ = ["approve", "args_digest", "edit", "interrupt_id", "reject", "request_id"]
    APPROVE_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    EDIT_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    REJECT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    approve: ApproveDecision
    args_digest: str
    edit: EditDecision
    interrupt_id: str
    reject: RejectDecision
    request_id: str
    def __init__(self, interrupt_id: _Optional[str] = ..., approve: _Optional[_Union[ApproveDecision, _Mapping]] = ..., reject: _Optional[_Union[RejectDecision, _Mapping]] = ..., edit: _Optional[_Union[EditDecision, _Mapping]] = ..., args_digest: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResolveInterruptResponse(_message.Message):
    __slots__ = ["interrupt"]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    interrupt: _hitl_pb2.Interrupt
    def __init__(self, interrupt: _Optional[_Union[_hitl_pb2.Interrupt, _Mapping]] = ...) -> None: ...

class RevokeApprovalLinkRequest(_message.Message):
    __slots__ = ["link_id"]
    LINK_ID_FIELD_NUMBER: _ClassVar[int]
    link_id: str
    def __init__(self, link_id: _Optional[str] = ...) -> None: ...

class RevokeApprovalLinkResponse(_message.Message):
    __slots__ = ["expire_time", "expired", "link_id"]
    EXPIRED_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    LINK_ID_FIELD_NUMBER: _ClassVar[int]
    expire_time: _timestamp_pb2.Timestamp
    expired: bool
    link_id: str
    def __init__(self, link_id: _Optional[str] = ..., expire_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expired: bool = ...) -> None: ...
