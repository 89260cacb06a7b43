from agentplane.v1 import spec_pb2 as _spec_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
OBLIGATION_STATE_ADDRESSED: ObligationState
OBLIGATION_STATE_OPEN: ObligationState
OBLIGATION_STATE_UNSPECIFIED: ObligationState
OBLIGATION_STATE_WITHDRAWN: ObligationState
RESOLUTION_HOW_ADDRESSED: ResolutionHow
RESOLUTION_HOW_UNSPECIFIED: ResolutionHow
RESOLUTION_HOW_WITHDRAWN: ResolutionHow

class Obligation(_message.Message):
    __slots__ = ["create_time", "obligation_id", "raised_by", "raised_in_verdict_id", "reason", "resolved_in_verdict_id", "state", "text"]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    OBLIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    RAISED_BY_FIELD_NUMBER: _ClassVar[int]
    RAISED_IN_VERDICT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_IN_VERDICT_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    create_time: _timestamp_pb2.Timestamp
    obligation_id: str
    raised_by: str
    raised_in_verdict_id: str
    reason: str
    resolved_in_verdict_id: str
    state: ObligationState
    text: str
    def __init__(self, obligation_id: _Optional[str] = ..., text: _Optional[str] = ..., state: _Optional[_Union[ObligationState, str]] = ..., raised_by: _Optional[str] = ..., raised_in_verdict_id: _Optional[str] = ..., resolved_in_verdict_id: _Optional[str] = ..., reason: _Optional[str] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ObligationResolution(_message.Message):
    __slots__ = ["how", "obligation_id", "reason"]
    HOW_FIELD_NUMBER: _ClassVar[int]
    OBLIGATION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    how: ResolutionHow
    obligation_id: str
    reason: str
    def __init__(self, obligation_id: _Optional[str] = ..., how: _Optional[_Union[ResolutionHow, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class Verdict(_message.Message):
    __slots__ = ["approved", "call_id", "create_time", "dropped_obligation_ids", "ends_turn", "node", "raised", "resolved", "result", "sequence", "task_id", "verdict_id"]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    DROPPED_OBLIGATION_IDS_FIELD_NUMBER: _ClassVar[int]
    ENDS_TURN_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    RAISED_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    VERDICT_ID_FIELD_NUMBER: _ClassVar[int]
    approved: bool
    call_id: str
    create_time: _timestamp_pb2.Timestamp
    dropped_obligation_ids: _containers.RepeatedScalarFieldContainer[str]
    ends_turn: bool
    node: str
    raised: _containers.RepeatedCompositeFieldContainer[Obligation]
    resolved: _containers.RepeatedCompositeFieldContainer[ObligationResolution]
    result: _spec_pb2.VerdictResult
    sequence: int
    task_id: str
    verdict_id: str
    def __init__(self, verdict_id: _Optional[str] = ..., task_id: _Optional[str] = ..., node: _Optional[str] = ..., result: _Optional[_Union[_spec_pb2.VerdictResult, _Mapping]] = ..., approved: bool = ..., resolved: _Optional[_Iterable[_Union[ObligationResolution, _Mapping]]] = ..., raised: _Optional[_Iterable[_Union[Obligation, _Mapping]]] = ..., dropped_obligation_ids: _Optional[_Iterable[str]] = ..., ends_turn: bool = ..., sequence: _Optional[int] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., call_id: _Optional[str] = ...) -> None: ...

class ObligationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ResolutionHow(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
