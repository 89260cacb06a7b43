from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

AUDIT_ACTION_APPROVE: AuditAction
AUDIT_ACTION_EDIT: AuditAction
AUDIT_ACTION_ESCALATE: AuditAction
AUDIT_ACTION_REJECT: AuditAction
AUDIT_ACTION_REMIND: AuditAction
AUDIT_ACTION_UNSPECIFIED: AuditAction
DECISION_SOURCE_CONTINUE: DecisionSource
DECISION_SOURCE_DEADLINE: DecisionSource
DECISION_SOURCE_HITL_DISABLED: DecisionSource
DECISION_SOURCE_HUMAN: DecisionSource
DECISION_SOURCE_POLICY: DecisionSource
DECISION_SOURCE_TASK_ENDED: DecisionSource
DECISION_SOURCE_UNSPECIFIED: DecisionSource
DECISION_TYPE_APPROVE: DecisionType
DECISION_TYPE_EDIT: DecisionType
DECISION_TYPE_REJECT: DecisionType
DECISION_TYPE_UNSPECIFIED: DecisionType
DESCRIPTOR: _descriptor.FileDescriptor
GATE_OUTCOME_ALLOW: GateOutcome
GATE_OUTCOME_INTERRUPT: GateOutcome
GATE_OUTCOME_REJECT: GateOutcome
GATE_OUTCOME_UNSPECIFIED: GateOutcome
INTERRUPT_KIND_AUTO_PAUSE: InterruptKind
INTERRUPT_KIND_MODEL_CALL_APPROVAL: InterruptKind
INTERRUPT_KIND_TOOL_APPROVAL: InterruptKind
INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED: InterruptKind
INTERRUPT_KIND_UNSPECIFIED: InterruptKind
INTERRUPT_STATE_PENDING: InterruptState
INTERRUPT_STATE_RESOLVED: InterruptState
INTERRUPT_STATE_UNSPECIFIED: InterruptState

class Approval(_message.Message):
    __slots__ = ["args_digest", "channel", "principal", "reason", "time", "type"]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    args_digest: str
    channel: str
    principal: str
    reason: str
    time: _timestamp_pb2.Timestamp
    type: DecisionType
    def __init__(self, principal: _Optional[str] = ..., channel: _Optional[str] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., args_digest: _Optional[str] = ..., reason: _Optional[str] = ..., type: _Optional[_Union[DecisionType, str]] = ...) -> None: ...

class ApprovalContext(_message.Message):
    __slots__ = ["agent_name", "original_input", "session_id", "tags", "trip_index"]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    ORIGINAL_INPUT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TRIP_INDEX_FIELD_NUMBER: _ClassVar[int]
    agent_name: str
    original_input: str
    session_id: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    trip_index: int
    def __init__(self, agent_name: _Optional[str] = ..., trip_index: _Optional[int] = ..., session_id: _Optional[str] = ..., original_input: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ...) -> None: ...

class ApprovalRequest(_message.Message):
    __slots__ = ["arguments_json", "context", "interrupt_id", "model_call", "request_time", "tool_description", "tool_name"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TIME_FIELD_NUMBER: _ClassVar[int]
    TOOL_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    context: ApprovalContext
    interrupt_id: str
    model_call: ModelCallApproval
    request_time: _timestamp_pb2.Timestamp
    tool_description: str
    tool_name: str
    def __init__(self, interrupt_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., tool_description: _Optional[str] = ..., context: _Optional[_Union[ApprovalContext, _Mapping]] = ..., request_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., arguments_json: _Optional[str] = ..., model_call: _Optional[_Union[ModelCallApproval, _Mapping]] = ...) -> None: ...

class ApprovalRequirement(_message.Message):
    __slots__ = ["approvals", "approvals_needed", "edited_arguments_json", "eligible", "escalate_time", "escalated", "escalation_group", "group", "quorum", "reject_quorum", "rejections", "remind_time", "reminded", "review_args_digest", "rule", "separation_of_duties", "started_by"]
    APPROVALS_FIELD_NUMBER: _ClassVar[int]
    APPROVALS_NEEDED_FIELD_NUMBER: _ClassVar[int]
    EDITED_ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_FIELD_NUMBER: _ClassVar[int]
    ESCALATED_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ESCALATION_GROUP_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    QUORUM_FIELD_NUMBER: _ClassVar[int]
    REJECTIONS_FIELD_NUMBER: _ClassVar[int]
    REJECT_QUORUM_FIELD_NUMBER: _ClassVar[int]
    REMINDED_FIELD_NUMBER: _ClassVar[int]
    REMIND_TIME_FIELD_NUMBER: _ClassVar[int]
    REVIEW_ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    SEPARATION_OF_DUTIES_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    approvals: _containers.RepeatedCompositeFieldContainer[Approval]
    approvals_needed: int
    edited_arguments_json: str
    eligible: _containers.RepeatedScalarFieldContainer[str]
    escalate_time: _timestamp_pb2.Timestamp
    escalated: bool
    escalation_group: str
    group: str
    quorum: int
    reject_quorum: int
    rejections: _containers.RepeatedCompositeFieldContainer[Approval]
    remind_time: _timestamp_pb2.Timestamp
    reminded: bool
    review_args_digest: str
    rule: str
    separation_of_duties: bool
    started_by: str
    def __init__(self, rule: _Optional[str] = ..., group: _Optional[str] = ..., quorum: _Optional[int] = ..., reject_quorum: _Optional[int] = ..., separation_of_duties: bool = ..., started_by: _Optional[str] = ..., approvals: _Optional[_Iterable[_Union[Approval, _Mapping]]] = ..., rejections: _Optional[_Iterable[_Union[Approval, _Mapping]]] = ..., edited_arguments_json: _Optional[str] = ..., review_args_digest: _Optional[str] = ..., remind_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., escalate_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., escalation_group: _Optional[str] = ..., reminded: bool = ..., escalated: bool = ..., eligible: _Optional[_Iterable[str]] = ..., approvals_needed: _Optional[int] = ...) -> None: ...

class AuditRecord(_message.Message):
    __slots__ = ["action", "args_digest", "audit_id", "channel", "group", "interrupt_id", "link_id", "principal", "reason", "request_id", "resolved", "result_args_digest", "rule", "source", "task_id", "tenant", "time", "tool_name"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    AUDIT_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    LINK_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    RESULT_ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    action: AuditAction
    args_digest: str
    audit_id: str
    channel: str
    group: str
    interrupt_id: str
    link_id: str
    principal: str
    reason: str
    request_id: str
    resolved: bool
    result_args_digest: str
    rule: str
    source: DecisionSource
    task_id: str
    tenant: str
    time: _timestamp_pb2.Timestamp
    tool_name: str
    def __init__(self, audit_id: _Optional[str] = ..., tenant: _Optional[str] = ..., task_id: _Optional[str] = ..., interrupt_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., action: _Optional[_Union[AuditAction, str]] = ..., principal: _Optional[str] = ..., channel: _Optional[str] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., args_digest: _Optional[str] = ..., reason: _Optional[str] = ..., source: _Optional[_Union[DecisionSource, str]] = ..., resolved: bool = ..., rule: _Optional[str] = ..., request_id: _Optional[str] = ..., result_args_digest: _Optional[str] = ..., group: _Optional[str] = ..., link_id: _Optional[str] = ...) -> None: ...

class Decision(_message.Message):
    __slots__ = ["args_digest", "arguments_json", "call_id", "channel", "decide_time", "decided_by", "interrupt_id", "model_reason", "reason", "ruled_args_digest", "source", "type"]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    DECIDE_TIME_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_REASON_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RULED_ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    args_digest: str
    arguments_json: str
    call_id: str
    channel: str
    decide_time: _timestamp_pb2.Timestamp
    decided_by: str
    interrupt_id: str
    model_reason: str
    reason: str
    ruled_args_digest: str
    source: DecisionSource
    type: DecisionType
    def __init__(self, type: _Optional[_Union[DecisionType, str]] = ..., reason: _Optional[str] = ..., ruled_args_digest: _Optional[str] = ..., args_digest: _Optional[str] = ..., decided_by: _Optional[str] = ..., decide_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., source: _Optional[_Union[DecisionSource, str]] = ..., model_reason: _Optional[str] = ..., interrupt_id: _Optional[str] = ..., arguments_json: _Optional[str] = ..., call_id: _Optional[str] = ..., channel: _Optional[str] = ...) -> None: ...

class Interrupt(_message.Message):
    __slots__ = ["approval", "args_digest", "call_id", "deadline", "decision", "interrupt_id", "kind", "node", "requirement", "state", "task_id", "tenant", "tool_output", "turn_end"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    ARGS_DIGEST_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TOOL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TURN_END_FIELD_NUMBER: _ClassVar[int]
    approval: ApprovalRequest
    args_digest: str
    call_id: str
    deadline: _timestamp_pb2.Timestamp
    decision: Decision
    interrupt_id: str
    kind: InterruptKind
    node: str
    requirement: ApprovalRequirement
    state: InterruptState
    task_id: str
    tenant: str
    tool_output: ToolOutputRequest
    turn_end: TurnEndRequest
    def __init__(self, interrupt_id: _Optional[str] = ..., task_id: _Optional[str] = ..., tenant: _Optional[str] = ..., kind: _Optional[_Union[InterruptKind, str]] = ..., state: _Optional[_Union[InterruptState, str]] = ..., approval: _Optional[_Union[ApprovalRequest, _Mapping]] = ..., turn_end: _Optional[_Union[TurnEndRequest, _Mapping]] = ..., tool_output: _Optional[_Union[ToolOutputRequest, _Mapping]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., decision: _Optional[_Union[Decision, _Mapping]] = ..., args_digest: _Optional[str] = ..., call_id: _Optional[str] = ..., node: _Optional[str] = ..., requirement: _Optional[_Union[ApprovalRequirement, _Mapping]] = ...) -> None: ...

class InterruptPolicy(_message.Message):
    __slots__ = ["allowlist", "denylist", "predicate"]
    ALLOWLIST_FIELD_NUMBER: _ClassVar[int]
    DENYLIST_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    allowlist: ToolListPolicy
    denylist: ToolListPolicy
    predicate: PredicatePolicy
    def __init__(self, allowlist: _Optional[_Union[ToolListPolicy, _Mapping]] = ..., denylist: _Optional[_Union[ToolListPolicy, _Mapping]] = ..., predicate: _Optional[_Union[PredicatePolicy, _Mapping]] = ...) -> None: ...

class ModelCallApproval(_message.Message):
    __slots__ = ["agent_id", "budget", "limit", "model", "period", "resets_at", "unit", "used"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    RESETS_AT_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    budget: str
    limit: str
    model: str
    period: str
    resets_at: _timestamp_pb2.Timestamp
    unit: str
    used: str
    def __init__(self, budget: _Optional[str] = ..., period: _Optional[str] = ..., unit: _Optional[str] = ..., used: _Optional[str] = ..., limit: _Optional[str] = ..., resets_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., agent_id: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class PredicatePolicy(_message.Message):
    __slots__ = ["expression"]
    EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    expression: str
    def __init__(self, expression: _Optional[str] = ...) -> None: ...

class TagList(_message.Message):
    __slots__ = ["tags"]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tags: _Optional[_Iterable[str]] = ...) -> None: ...

class ToolGated(_message.Message):
    __slots__ = ["arguments_json", "call_id", "interrupt_id", "node", "outcome", "reason", "tags", "tool_name"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    call_id: str
    interrupt_id: str
    node: str
    outcome: GateOutcome
    reason: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    tool_name: str
    def __init__(self, call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., outcome: _Optional[_Union[GateOutcome, str]] = ..., interrupt_id: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., node: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class ToolListPolicy(_message.Message):
    __slots__ = ["tags", "tools"]
    class TagsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TagList
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TagList, _Mapping]] = ...) -> None: ...
    TAGS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.MessageMap[str, TagList]
    tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tools: _Optional[_Iterable[str]] = ..., tags: _Optional[_Mapping[str, TagList]] = ...) -> None: ...

class ToolOutputRequest(_message.Message):
    __slots__ = ["agent_name", "arguments_json", "request_time", "session_id", "tool_name", "trip_index"]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TIME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TRIP_INDEX_FIELD_NUMBER: _ClassVar[int]
    agent_name: str
    arguments_json: str
    request_time: _timestamp_pb2.Timestamp
    session_id: str
    tool_name: str
    trip_index: int
    def __init__(self, tool_name: _Optional[str] = ..., arguments_json: _Optional[str] = ..., agent_name: _Optional[str] = ..., trip_index: _Optional[int] = ..., session_id: _Optional[str] = ..., request_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class TurnEndRequest(_message.Message):
    __slots__ = ["agent_name", "request_time", "session_id"]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_TIME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent_name: str
    request_time: _timestamp_pb2.Timestamp
    session_id: str
    def __init__(self, agent_name: _Optional[str] = ..., session_id: _Optional[str] = ..., request_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GateOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class InterruptKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class InterruptState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DecisionType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class DecisionSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AuditAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
