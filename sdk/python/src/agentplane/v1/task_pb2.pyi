from agentplane.v1 import hitl_pb2 as _hitl_pb2
from agentplane.v1 import peers_pb2 as _peers_pb2
from agentplane.v1 import spec_pb2 as _spec_pb2
from agentplane.v1 import verdict_pb2 as _verdict_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
LEASE_CHANGE_KIND_EXPIRED: LeaseChangeKind
LEASE_CHANGE_KIND_GRANTED: LeaseChangeKind
LEASE_CHANGE_KIND_RELEASED: LeaseChangeKind
LEASE_CHANGE_KIND_UNSPECIFIED: LeaseChangeKind
MESSAGE_ROLE_ASSISTANT: MessageRole
MESSAGE_ROLE_SYSTEM: MessageRole
MESSAGE_ROLE_UNSPECIFIED: MessageRole
MESSAGE_ROLE_USER: MessageRole
TASK_STATE_CANCELED: TaskState
TASK_STATE_COMPLETED: TaskState
TASK_STATE_FAILED: TaskState
TASK_STATE_INPUT_REQUIRED: TaskState
TASK_STATE_SUBMITTED: TaskState
TASK_STATE_UNSPECIFIED: TaskState
TASK_STATE_WORKING: TaskState

class BudgetStatus(_message.Message):
    __slots__ = ["agent_id", "budget", "exceeded", "limit_cost_micros", "limit_tokens", "on_limit", "period", "period_start", "resets_at", "tenant", "used_cost_micros", "used_tokens", "warn_percent", "warned"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    EXCEEDED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ON_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    RESETS_AT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    USED_COST_MICROS_FIELD_NUMBER: _ClassVar[int]
    USED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    WARNED_FIELD_NUMBER: _ClassVar[int]
    WARN_PERCENT_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    budget: str
    exceeded: bool
    limit_cost_micros: int
    limit_tokens: int
    on_limit: str
    period: str
    period_start: _timestamp_pb2.Timestamp
    resets_at: _timestamp_pb2.Timestamp
    tenant: str
    used_cost_micros: int
    used_tokens: int
    warn_percent: int
    warned: bool
    def __init__(self, budget: _Optional[str] = ..., tenant: _Optional[str] = ..., agent_id: _Optional[str] = ..., period: _Optional[str] = ..., period_start: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., resets_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., used_tokens: _Optional[int] = ..., limit_tokens: _Optional[int] = ..., used_cost_micros: _Optional[int] = ..., limit_cost_micros: _Optional[int] = ..., warn_percent: _Optional[int] = ..., warned: bool = ..., exceeded: bool = ..., on_limit: _Optional[str] = ...) -> None: ...

class BudgetWarning(_message.Message):
    __slots__ = ["budget"]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    budget: BudgetStatus
    def __init__(self, budget: _Optional[_Union[BudgetStatus, _Mapping]] = ...) -> None: ...

class CancelRequested(_message.Message):
    __slots__ = ["reason", "requested_by"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    reason: str
    requested_by: str
    def __init__(self, reason: _Optional[str] = ..., requested_by: _Optional[str] = ...) -> None: ...

class ConcurrencyLimit(_message.Message):
    __slots__ = ["key", "limit"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    key: str
    limit: int
    def __init__(self, key: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class DataPart(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Struct
    def __init__(self, data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class DroppedEntry(_message.Message):
    __slots__ = ["name", "reason"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class EntriesDropped(_message.Message):
    __slots__ = ["entries", "protocol"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[DroppedEntry]
    protocol: str
    def __init__(self, protocol: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[DroppedEntry, _Mapping]]] = ...) -> None: ...

class FilePart(_message.Message):
    __slots__ = ["bytes", "media_type", "name", "uri"]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    bytes: bytes
    media_type: str
    name: str
    uri: str
    def __init__(self, name: _Optional[str] = ..., media_type: _Optional[str] = ..., bytes: _Optional[bytes] = ..., uri: _Optional[str] = ...) -> None: ...

class InjectionIgnored(_message.Message):
    __slots__ = ["names", "reason"]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    def __init__(self, names: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ...) -> None: ...

class InterruptRaised(_message.Message):
    __slots__ = ["interrupt"]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    interrupt: _hitl_pb2.Interrupt
    def __init__(self, interrupt: _Optional[_Union[_hitl_pb2.Interrupt, _Mapping]] = ...) -> None: ...

class InterruptResolved(_message.Message):
    __slots__ = ["decision", "interrupt_id"]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    decision: _hitl_pb2.Decision
    interrupt_id: str
    def __init__(self, interrupt_id: _Optional[str] = ..., decision: _Optional[_Union[_hitl_pb2.Decision, _Mapping]] = ...) -> None: ...

class LeaseChanged(_message.Message):
    __slots__ = ["attempt", "epoch", "kind", "lease_id", "runtime_id", "unacknowledged"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    UNACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    epoch: int
    kind: LeaseChangeKind
    lease_id: str
    runtime_id: str
    unacknowledged: bool
    def __init__(self, kind: _Optional[_Union[LeaseChangeKind, str]] = ..., runtime_id: _Optional[str] = ..., lease_id: _Optional[str] = ..., epoch: _Optional[int] = ..., attempt: _Optional[int] = ..., unacknowledged: bool = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["message_id", "model", "node", "parts", "role", "usage"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    model: str
    node: str
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    role: MessageRole
    usage: TokenUsage
    def __init__(self, message_id: _Optional[str] = ..., role: _Optional[_Union[MessageRole, str]] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ..., node: _Optional[str] = ..., model: _Optional[str] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ...) -> None: ...

class MessageDelta(_message.Message):
    __slots__ = ["after_sequence", "message_id", "node", "text_delta"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    message_id: str
    node: str
    text_delta: str
    def __init__(self, message_id: _Optional[str] = ..., text_delta: _Optional[str] = ..., node: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ["data", "file", "text"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    FILE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    data: DataPart
    file: FilePart
    text: str
    def __init__(self, text: _Optional[str] = ..., data: _Optional[_Union[DataPart, _Mapping]] = ..., file: _Optional[_Union[FilePart, _Mapping]] = ...) -> None: ...

class RuntimeNote(_message.Message):
    __slots__ = ["attributes", "text"]
    class AttributesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    attributes: _containers.ScalarMap[str, str]
    text: str
    def __init__(self, text: _Optional[str] = ..., attributes: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ScheduledBy(_message.Message):
    __slots__ = ["manual", "nominal_time", "schedule_id"]
    MANUAL_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_TIME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    manual: bool
    nominal_time: _timestamp_pb2.Timestamp
    schedule_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., nominal_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., manual: bool = ...) -> None: ...

class StateChanged(_message.Message):
    __slots__ = ["from_state", "reason", "to_state"]
    FROM_STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TO_STATE_FIELD_NUMBER: _ClassVar[int]
    from_state: TaskState
    reason: str
    to_state: TaskState
    def __init__(self, from_state: _Optional[_Union[TaskState, str]] = ..., to_state: _Optional[_Union[TaskState, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class StreamCaughtUp(_message.Message):
    __slots__ = ["last_sequence"]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    last_sequence: int
    def __init__(self, last_sequence: _Optional[int] = ...) -> None: ...

class StreamKeepalive(_message.Message):
    __slots__ = ["time"]
    TIME_FIELD_NUMBER: _ClassVar[int]
    time: _timestamp_pb2.Timestamp
    def __init__(self, time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ["agent", "agent_id", "attempt", "cancel_requested", "concurrency", "concurrency_key", "create_time", "created_by", "effective_a2a_peers", "effective_mcp_servers", "end_time", "failure", "graph", "input", "interrupt_policy", "interrupt_timeout", "labels", "last_sequence", "output", "pending_interrupt_ids", "priority", "queue", "request_id", "runtime_id", "scheduled_by", "session_id", "spec_kind", "state", "task_id", "tenant", "tool_axes", "trace_context", "update_time", "usage"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    AGENT_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_A2A_PEERS_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_POLICY_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PENDING_INTERRUPT_IDS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_BY_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_KIND_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TOOL_AXES_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    agent: _spec_pb2.AgentSpec
    agent_id: str
    attempt: int
    cancel_requested: bool
    concurrency: ConcurrencyLimit
    concurrency_key: str
    create_time: _timestamp_pb2.Timestamp
    created_by: str
    effective_a2a_peers: _containers.RepeatedCompositeFieldContainer[_peers_pb2.A2aPeerInfo]
    effective_mcp_servers: _containers.RepeatedCompositeFieldContainer[_peers_pb2.McpServerInfo]
    end_time: _timestamp_pb2.Timestamp
    failure: TaskFailure
    graph: _spec_pb2.GraphSpec
    input: Message
    interrupt_policy: _hitl_pb2.InterruptPolicy
    interrupt_timeout: _duration_pb2.Duration
    labels: _containers.ScalarMap[str, str]
    last_sequence: int
    output: TaskOutput
    pending_interrupt_ids: _containers.RepeatedScalarFieldContainer[str]
    priority: int
    queue: str
    request_id: str
    runtime_id: str
    scheduled_by: ScheduledBy
    session_id: str
    spec_kind: str
    state: TaskState
    task_id: str
    tenant: str
    tool_axes: _containers.RepeatedCompositeFieldContainer[_peers_pb2.ToolAxisOverride]
    trace_context: TraceContext
    update_time: _timestamp_pb2.Timestamp
    usage: TokenUsage
    def __init__(self, task_id: _Optional[str] = ..., tenant: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., request_id: _Optional[str] = ..., agent: _Optional[_Union[_spec_pb2.AgentSpec, _Mapping]] = ..., graph: _Optional[_Union[_spec_pb2.GraphSpec, _Mapping]] = ..., agent_id: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., create_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_sequence: _Optional[int] = ..., attempt: _Optional[int] = ..., failure: _Optional[_Union[TaskFailure, _Mapping]] = ..., output: _Optional[_Union[TaskOutput, _Mapping]] = ..., interrupt_policy: _Optional[_Union[_hitl_pb2.InterruptPolicy, _Mapping]] = ..., pending_interrupt_ids: _Optional[_Iterable[str]] = ..., cancel_requested: bool = ..., created_by: _Optional[str] = ..., runtime_id: _Optional[str] = ..., session_id: _Optional[str] = ..., tool_axes: _Optional[_Iterable[_Union[_peers_pb2.ToolAxisOverride, _Mapping]]] = ..., interrupt_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., effective_mcp_servers: _Optional[_Iterable[_Union[_peers_pb2.McpServerInfo, _Mapping]]] = ..., effective_a2a_peers: _Optional[_Iterable[_Union[_peers_pb2.A2aPeerInfo, _Mapping]]] = ..., spec_kind: _Optional[str] = ..., queue: _Optional[str] = ..., trace_context: _Optional[_Union[TraceContext, _Mapping]] = ..., input: _Optional[_Union[Message, _Mapping]] = ..., usage: _Optional[_Union[TokenUsage, _Mapping]] = ..., scheduled_by: _Optional[_Union[ScheduledBy, _Mapping]] = ..., priority: _Optional[int] = ..., concurrency: _Optional[_Union[ConcurrencyLimit, _Mapping]] = ..., concurrency_key: _Optional[str] = ...) -> None: ...

class TaskEvent(_message.Message):
    __slots__ = ["a2a_injection_ignored", "budget_warning", "cancel_requested", "entries_dropped", "interrupt_raised", "interrupt_resolved", "lease", "mcp_injection_ignored", "message", "note", "output", "sequence", "state_changed", "submitted", "task_id", "time", "tool_call", "tool_gated", "tool_result", "verdict_recorded"]
    A2A_INJECTION_IGNORED_FIELD_NUMBER: _ClassVar[int]
    BUDGET_WARNING_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_DROPPED_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_RAISED_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    MCP_INJECTION_IGNORED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STATE_CHANGED_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_GATED_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    VERDICT_RECORDED_FIELD_NUMBER: _ClassVar[int]
    a2a_injection_ignored: InjectionIgnored
    budget_warning: BudgetWarning
    cancel_requested: CancelRequested
    entries_dropped: EntriesDropped
    interrupt_raised: InterruptRaised
    interrupt_resolved: InterruptResolved
    lease: LeaseChanged
    mcp_injection_ignored: InjectionIgnored
    message: Message
    note: RuntimeNote
    output: TaskOutput
    sequence: int
    state_changed: StateChanged
    submitted: TaskSubmitted
    task_id: str
    time: _timestamp_pb2.Timestamp
    tool_call: ToolCall
    tool_gated: _hitl_pb2.ToolGated
    tool_result: ToolResult
    verdict_recorded: VerdictRecorded
    def __init__(self, task_id: _Optional[str] = ..., sequence: _Optional[int] = ..., time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., submitted: _Optional[_Union[TaskSubmitted, _Mapping]] = ..., state_changed: _Optional[_Union[StateChanged, _Mapping]] = ..., message: _Optional[_Union[Message, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResult, _Mapping]] = ..., note: _Optional[_Union[RuntimeNote, _Mapping]] = ..., lease: _Optional[_Union[LeaseChanged, _Mapping]] = ..., tool_gated: _Optional[_Union[_hitl_pb2.ToolGated, _Mapping]] = ..., interrupt_raised: _Optional[_Union[InterruptRaised, _Mapping]] = ..., interrupt_resolved: _Optional[_Union[InterruptResolved, _Mapping]] = ..., verdict_recorded: _Optional[_Union[VerdictRecorded, _Mapping]] = ..., mcp_injection_ignored: _Optional[_Union[InjectionIgnored, _Mapping]] = ..., a2a_injection_ignored: _Optional[_Union[InjectionIgnored, _Mapping]] = ..., entries_dropped: _Optional[_Union[EntriesDropped, _Mapping]] = ..., cancel_requested: _Optional[_Union[CancelRequested, _Mapping]] = ..., output: _Optional[_Union[TaskOutput, _Mapping]] = ..., budget_warning: _Optional[_Union[BudgetWarning, _Mapping]] = ...) -> None: ...

class TaskFailure(_message.Message):
    __slots__ = ["message", "reason"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    message: str
    reason: str
    def __init__(self, reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class TaskOutput(_message.Message):
    __slots__ = ["message", "structured"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    message: Message
    structured: _struct_pb2.Value
    def __init__(self, structured: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., message: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class TaskSubmitted(_message.Message):
    __slots__ = ["created_by", "input", "kind"]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    created_by: str
    input: Message
    kind: str
    def __init__(self, kind: _Optional[str] = ..., created_by: _Optional[str] = ..., input: _Optional[_Union[Message, _Mapping]] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ["input_tokens", "output_tokens", "total_tokens"]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    output_tokens: int
    total_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., total_tokens: _Optional[int] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ["arguments_json", "call_id", "message_id", "node", "tool_name", "trip_index"]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TRIP_INDEX_FIELD_NUMBER: _ClassVar[int]
    arguments_json: str
    call_id: str
    message_id: str
    node: str
    tool_name: str
    trip_index: int
    def __init__(self, call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., node: _Optional[str] = ..., trip_index: _Optional[int] = ..., arguments_json: _Optional[str] = ..., message_id: _Optional[str] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ["call_id", "is_error", "node", "result", "tool_name"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    is_error: bool
    node: str
    result: _struct_pb2.Value
    tool_name: str
    def __init__(self, call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., is_error: bool = ..., node: _Optional[str] = ...) -> None: ...

class TraceContext(_message.Message):
    __slots__ = ["traceparent", "tracestate"]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACESTATE_FIELD_NUMBER: _ClassVar[int]
    traceparent: str
    tracestate: str
    def __init__(self, traceparent: _Optional[str] = ..., tracestate: _Optional[str] = ...) -> None: ...

class VerdictRecorded(_message.Message):
    __slots__ = ["verdict"]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    verdict: _verdict_pb2.Verdict
    def __init__(self, verdict: _Optional[_Union[_verdict_pb2.Verdict, _Mapping]] = ...) -> None: ...

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MessageRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LeaseChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
