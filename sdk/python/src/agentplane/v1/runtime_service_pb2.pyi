from agentplane.v1 import hitl_pb2 as _hitl_pb2
from agentplane.v1 import peers_pb2 as _peers_pb2
from agentplane.v1 import spec_pb2 as _spec_pb2
from agentplane.v1 import task_pb2 as _task_pb2
from agentplane.v1 import verdict_pb2 as _verdict_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AwaitCanceled(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class AwaitDecisionRequest(_message.Message):
    __slots__ = ["interrupt_id", "lease"]
    INTERRUPT_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    interrupt_id: str
    lease: LeaseRef
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., interrupt_id: _Optional[str] = ...) -> None: ...

class AwaitDecisionResponse(_message.Message):
    __slots__ = ["canceled", "decision", "keepalive", "pending"]
    CANCELED_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    canceled: AwaitCanceled
    decision: _hitl_pb2.Decision
    keepalive: _task_pb2.StreamKeepalive
    pending: AwaitPending
    def __init__(self, decision: _Optional[_Union[_hitl_pb2.Decision, _Mapping]] = ..., pending: _Optional[_Union[AwaitPending, _Mapping]] = ..., keepalive: _Optional[_Union[_task_pb2.StreamKeepalive, _Mapping]] = ..., canceled: _Optional[_Union[AwaitCanceled, _Mapping]] = ...) -> None: ...

class AwaitPending(_message.Message):
    __slots__ = ["deadline"]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CheckModelCallRequest(_message.Message):
    __slots__ = ["agent_name", "call_id", "lease", "model", "trip_index"]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TRIP_INDEX_FIELD_NUMBER: _ClassVar[int]
    agent_name: str
    call_id: str
    lease: LeaseRef
    model: str
    trip_index: int
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., call_id: _Optional[str] = ..., agent_name: _Optional[str] = ..., trip_index: _Optional[int] = ..., model: _Optional[str] = ...) -> None: ...

class CheckModelCallResponse(_message.Message):
    __slots__ = ["decision", "interrupt", "outcome"]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    decision: _hitl_pb2.Decision
    interrupt: _hitl_pb2.Interrupt
    outcome: _hitl_pb2.GateOutcome
    def __init__(self, outcome: _Optional[_Union[_hitl_pb2.GateOutcome, str]] = ..., interrupt: _Optional[_Union[_hitl_pb2.Interrupt, _Mapping]] = ..., decision: _Optional[_Union[_hitl_pb2.Decision, _Mapping]] = ...) -> None: ...

class CheckToolCallRequest(_message.Message):
    __slots__ = ["agent_name", "annotations", "arguments_json", "call_id", "lease", "message_id", "report_allowed_call", "tool_description", "tool_name", "trip_index"]
    AGENT_NAME_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_ALLOWED_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TRIP_INDEX_FIELD_NUMBER: _ClassVar[int]
    agent_name: str
    annotations: _spec_pb2.McpToolAnnotations
    arguments_json: str
    call_id: str
    lease: LeaseRef
    message_id: str
    report_allowed_call: bool
    tool_description: str
    tool_name: str
    trip_index: int
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., tool_description: _Optional[str] = ..., agent_name: _Optional[str] = ..., trip_index: _Optional[int] = ..., annotations: _Optional[_Union[_spec_pb2.McpToolAnnotations, _Mapping]] = ..., arguments_json: _Optional[str] = ..., report_allowed_call: bool = ..., message_id: _Optional[str] = ...) -> None: ...

class CheckToolCallResponse(_message.Message):
    __slots__ = ["call_reported", "decision", "interrupt", "outcome", "reason", "reported_with_check", "result_reported"]
    CALL_REPORTED_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REPORTED_WITH_CHECK_FIELD_NUMBER: _ClassVar[int]
    RESULT_REPORTED_FIELD_NUMBER: _ClassVar[int]
    call_reported: bool
    decision: _hitl_pb2.Decision
    interrupt: _hitl_pb2.Interrupt
    outcome: _hitl_pb2.GateOutcome
    reason: str
    reported_with_check: bool
    result_reported: bool
    def __init__(self, outcome: _Optional[_Union[_hitl_pb2.GateOutcome, str]] = ..., interrupt: _Optional[_Union[_hitl_pb2.Interrupt, _Mapping]] = ..., decision: _Optional[_Union[_hitl_pb2.Decision, _Mapping]] = ..., reason: _Optional[str] = ..., call_reported: bool = ..., result_reported: bool = ..., reported_with_check: bool = ...) -> None: ...

class CompleteTaskRequest(_message.Message):
    __slots__ = ["lease", "output", "request_id"]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    output: _task_pb2.TaskOutput
    request_id: str
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., output: _Optional[_Union[_task_pb2.TaskOutput, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CompleteTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class FailTaskRequest(_message.Message):
    __slots__ = ["lease", "message", "reason", "request_id", "retry"]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RETRY_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    message: str
    reason: str
    request_id: str
    retry: bool
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., retry: bool = ..., request_id: _Optional[str] = ...) -> None: ...

class FailTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ["lease"]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ["cancel_reason", "canceled", "deadline"]
    CANCELED_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    cancel_reason: str
    canceled: bool
    deadline: _timestamp_pb2.Timestamp
    def __init__(self, deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., canceled: bool = ..., cancel_reason: _Optional[str] = ...) -> None: ...

class Lease(_message.Message):
    __slots__ = ["a2a_peers", "attempt", "check_model_calls", "continue_messages", "continue_tool_results", "deadline", "epoch", "history_cursor", "lease_id", "mcp_servers", "pending_interrupts", "resolved_interrupts", "spec", "task", "trace_context"]
    A2A_PEERS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CHECK_MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    HISTORY_CURSOR_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    PENDING_INTERRUPTS_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_INTERRUPTS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    a2a_peers: _containers.RepeatedCompositeFieldContainer[_peers_pb2.A2aPeer]
    attempt: int
    check_model_calls: bool
    continue_messages: _containers.RepeatedCompositeFieldContainer[_task_pb2.Message]
    continue_tool_results: _containers.RepeatedCompositeFieldContainer[_task_pb2.ToolResult]
    deadline: _timestamp_pb2.Timestamp
    epoch: int
    history_cursor: int
    lease_id: str
    mcp_servers: _containers.RepeatedCompositeFieldContainer[_peers_pb2.McpServer]
    pending_interrupts: _containers.RepeatedCompositeFieldContainer[_hitl_pb2.Interrupt]
    resolved_interrupts: _containers.RepeatedCompositeFieldContainer[_hitl_pb2.Interrupt]
    spec: ResolvedSpec
    task: _task_pb2.Task
    trace_context: _task_pb2.TraceContext
    def __init__(self, lease_id: _Optional[str] = ..., epoch: _Optional[int] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ..., spec: _Optional[_Union[ResolvedSpec, _Mapping]] = ..., history_cursor: _Optional[int] = ..., attempt: _Optional[int] = ..., resolved_interrupts: _Optional[_Iterable[_Union[_hitl_pb2.Interrupt, _Mapping]]] = ..., pending_interrupts: _Optional[_Iterable[_Union[_hitl_pb2.Interrupt, _Mapping]]] = ..., continue_messages: _Optional[_Iterable[_Union[_task_pb2.Message, _Mapping]]] = ..., continue_tool_results: _Optional[_Iterable[_Union[_task_pb2.ToolResult, _Mapping]]] = ..., mcp_servers: _Optional[_Iterable[_Union[_peers_pb2.McpServer, _Mapping]]] = ..., a2a_peers: _Optional[_Iterable[_Union[_peers_pb2.A2aPeer, _Mapping]]] = ..., trace_context: _Optional[_Union[_task_pb2.TraceContext, _Mapping]] = ..., check_model_calls: bool = ...) -> None: ...

class LeaseRef(_message.Message):
    __slots__ = ["epoch", "lease_id", "task_id"]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    lease_id: str
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., lease_id: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class LeaseTasksRequest(_message.Message):
    __slots__ = ["max_tasks", "queues", "runtime_id", "wait"]
    MAX_TASKS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    max_tasks: int
    queues: _containers.RepeatedScalarFieldContainer[str]
    runtime_id: str
    wait: _duration_pb2.Duration
    def __init__(self, runtime_id: _Optional[str] = ..., max_tasks: _Optional[int] = ..., wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., queues: _Optional[_Iterable[str]] = ...) -> None: ...

class LeaseTasksResponse(_message.Message):
    __slots__ = ["leases"]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    leases: _containers.RepeatedCompositeFieldContainer[Lease]
    def __init__(self, leases: _Optional[_Iterable[_Union[Lease, _Mapping]]] = ...) -> None: ...

class PauseTaskRequest(_message.Message):
    __slots__ = ["lease", "message", "node", "request_id", "tool_output_calls"]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_OUTPUT_CALLS_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    message: _task_pb2.Message
    node: str
    request_id: str
    tool_output_calls: _containers.RepeatedCompositeFieldContainer[_task_pb2.ToolCall]
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., node: _Optional[str] = ..., message: _Optional[_Union[_task_pb2.Message, _Mapping]] = ..., tool_output_calls: _Optional[_Iterable[_Union[_task_pb2.ToolCall, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class PauseTaskResponse(_message.Message):
    __slots__ = ["interrupt", "tool_output_interrupts"]
    INTERRUPT_FIELD_NUMBER: _ClassVar[int]
    TOOL_OUTPUT_INTERRUPTS_FIELD_NUMBER: _ClassVar[int]
    interrupt: _hitl_pb2.Interrupt
    tool_output_interrupts: _containers.RepeatedCompositeFieldContainer[_hitl_pb2.Interrupt]
    def __init__(self, interrupt: _Optional[_Union[_hitl_pb2.Interrupt, _Mapping]] = ..., tool_output_interrupts: _Optional[_Iterable[_Union[_hitl_pb2.Interrupt, _Mapping]]] = ...) -> None: ...

class PublishDeltasRequest(_message.Message):
    __slots__ = ["deltas", "lease"]
    DELTAS_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    deltas: _containers.RepeatedCompositeFieldContainer[_task_pb2.MessageDelta]
    lease: LeaseRef
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., deltas: _Optional[_Iterable[_Union[_task_pb2.MessageDelta, _Mapping]]] = ...) -> None: ...

class PublishDeltasResponse(_message.Message):
    __slots__ = ["watchers"]
    WATCHERS_FIELD_NUMBER: _ClassVar[int]
    watchers: int
    def __init__(self, watchers: _Optional[int] = ...) -> None: ...

class ReadTaskHistoryRequest(_message.Message):
    __slots__ = ["after_sequence", "lease", "page_size"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    lease: LeaseRef
    page_size: int
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., after_sequence: _Optional[int] = ..., page_size: _Optional[int] = ...) -> None: ...

class ReadTaskHistoryResponse(_message.Message):
    __slots__ = ["events", "last_sequence"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_task_pb2.TaskEvent]
    last_sequence: int
    def __init__(self, events: _Optional[_Iterable[_Union[_task_pb2.TaskEvent, _Mapping]]] = ..., last_sequence: _Optional[int] = ...) -> None: ...

class RecordVerdictRequest(_message.Message):
    __slots__ = ["call_id", "ends_turn", "lease", "node", "raised", "request_id", "resolved", "result"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ENDS_TURN_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    RAISED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    ends_turn: bool
    lease: LeaseRef
    node: str
    raised: _containers.RepeatedScalarFieldContainer[str]
    request_id: str
    resolved: _containers.RepeatedCompositeFieldContainer[_verdict_pb2.ObligationResolution]
    result: _spec_pb2.VerdictResult
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., node: _Optional[str] = ..., result: _Optional[_Union[_spec_pb2.VerdictResult, _Mapping]] = ..., resolved: _Optional[_Iterable[_Union[_verdict_pb2.ObligationResolution, _Mapping]]] = ..., raised: _Optional[_Iterable[str]] = ..., ends_turn: bool = ..., call_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class RecordVerdictResponse(_message.Message):
    __slots__ = ["open_obligations", "verdict"]
    OPEN_OBLIGATIONS_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    open_obligations: _containers.RepeatedCompositeFieldContainer[_verdict_pb2.Obligation]
    verdict: _verdict_pb2.Verdict
    def __init__(self, verdict: _Optional[_Union[_verdict_pb2.Verdict, _Mapping]] = ..., open_obligations: _Optional[_Iterable[_Union[_verdict_pb2.Obligation, _Mapping]]] = ...) -> None: ...

class ReportEventsRequest(_message.Message):
    __slots__ = ["events", "lease", "request_id"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[RuntimeEvent]
    lease: LeaseRef
    request_id: str
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., events: _Optional[_Iterable[_Union[RuntimeEvent, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class ReportEventsResponse(_message.Message):
    __slots__ = ["last_sequence"]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    last_sequence: int
    def __init__(self, last_sequence: _Optional[int] = ...) -> None: ...

class ResolvedSpec(_message.Message):
    __slots__ = ["agent", "graph"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    agent: _spec_pb2.AgentSpec
    graph: _spec_pb2.GraphSpec
    def __init__(self, agent: _Optional[_Union[_spec_pb2.AgentSpec, _Mapping]] = ..., graph: _Optional[_Union[_spec_pb2.GraphSpec, _Mapping]] = ...) -> None: ...

class RuntimeEvent(_message.Message):
    __slots__ = ["message", "note", "tool_call", "tool_result"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    message: _task_pb2.Message
    note: _task_pb2.RuntimeNote
    tool_call: _task_pb2.ToolCall
    tool_result: _task_pb2.ToolResult
    def __init__(self, message: _Optional[_Union[_task_pb2.Message, _Mapping]] = ..., tool_call: _Optional[_Union[_task_pb2.ToolCall, _Mapping]] = ..., tool_result: _Optional[_Union[_task_pb2.ToolResult, _Mapping]] = ..., note: _Optional[_Union[_task_pb2.RuntimeNote, _Mapping]] = ...) -> None: ...

class SuspendTaskRequest(_message.Message):
    __slots__ = ["lease", "request_id"]
    LEASE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    lease: LeaseRef
    request_id: str
    def __init__(self, lease: _Optional[_Union[LeaseRef, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class SuspendTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...
