from agentplane.v1 import hitl_pb2 as _hitl_pb2
from agentplane.v1 import peers_pb2 as _peers_pb2
from agentplane.v1 import spec_service_pb2 as _spec_service_pb2
from agentplane.v1 import task_pb2 as _task_pb2
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
TASK_VIEW_BASIC: TaskView
TASK_VIEW_FULL: TaskView
TASK_VIEW_UNSPECIFIED: TaskView

class CancelTaskRequest(_message.Message):
    __slots__ = ["reason", "request_id", "task_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    request_id: str
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., reason: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CancelTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class ContinueTaskRequest(_message.Message):
    __slots__ = ["message", "request_id", "task_id", "tool_outputs"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    message: _task_pb2.Message
    request_id: str
    task_id: str
    tool_outputs: ToolOutputs
    def __init__(self, task_id: _Optional[str] = ..., message: _Optional[_Union[_task_pb2.Message, _Mapping]] = ..., tool_outputs: _Optional[_Union[ToolOutputs, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class ContinueTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ["task_id", "view"]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    view: TaskView
    def __init__(self, task_id: _Optional[str] = ..., view: _Optional[_Union[TaskView, str]] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ...) -> None: ...

class ListObligationsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "states", "task_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    states: _containers.RepeatedScalarFieldContainer[_verdict_pb2.ObligationState]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., states: _Optional[_Iterable[_Union[_verdict_pb2.ObligationState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListObligationsResponse(_message.Message):
    __slots__ = ["next_page_token", "obligations"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OBLIGATIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    obligations: _containers.RepeatedCompositeFieldContainer[_verdict_pb2.Obligation]
    def __init__(self, obligations: _Optional[_Iterable[_Union[_verdict_pb2.Obligation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListTaskEventsRequest(_message.Message):
    __slots__ = ["after_sequence", "page_size", "page_token", "task_id"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    page_size: int
    page_token: str
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class ListTaskEventsResponse(_message.Message):
    __slots__ = ["events", "next_page_token"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_task_pb2.TaskEvent]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[_task_pb2.TaskEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ["created_after", "created_before", "label_selector", "page_size", "page_token", "queue", "states", "view"]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    label_selector: _containers.RepeatedScalarFieldContainer[str]
    page_size: int
    page_token: str
    queue: str
    states: _containers.RepeatedScalarFieldContainer[_task_pb2.TaskState]
    view: TaskView
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., states: _Optional[_Iterable[_Union[_task_pb2.TaskState, str]]] = ..., label_selector: _Optional[_Iterable[str]] = ..., created_after: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., view: _Optional[_Union[TaskView, str]] = ..., queue: _Optional[str] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ["next_page_token", "tasks"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    tasks: _containers.RepeatedCompositeFieldContainer[_task_pb2.Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[_task_pb2.Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListVerdictsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "task_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListVerdictsResponse(_message.Message):
    __slots__ = ["next_page_token", "verdicts"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    verdicts: _containers.RepeatedCompositeFieldContainer[_verdict_pb2.Verdict]
    def __init__(self, verdicts: _Optional[_Iterable[_Union[_verdict_pb2.Verdict, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class StartTaskRequest(_message.Message):
    __slots__ = ["a2a_peers", "agent_id", "concurrency", "document", "format", "input", "interrupt_policy", "interrupt_timeout", "labels", "mcp_servers", "priority", "queue", "request_id", "session_id", "spec", "tool_axes", "view"]
    class LabelsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    A2A_PEERS_FIELD_NUMBER: _ClassVar[int]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_POLICY_FIELD_NUMBER: _ClassVar[int]
    INTERRUPT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVERS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TOOL_AXES_FIELD_NUMBER: _ClassVar[int]
    VIEW_FIELD_NUMBER: _ClassVar[int]
    a2a_peers: _peers_pb2.A2aPeerList
    agent_id: str
    concurrency: _task_pb2.ConcurrencyLimit
    document: bytes
    format: _spec_service_pb2.DocumentFormat
    input: _task_pb2.Message
    interrupt_policy: _hitl_pb2.InterruptPolicy
    interrupt_timeout: _duration_pb2.Duration
    labels: _containers.ScalarMap[str, str]
    mcp_servers: _peers_pb2.McpServerList
    priority: int
    queue: str
    request_id: str
    session_id: str
    spec: _struct_pb2.Struct
    tool_axes: _containers.RepeatedCompositeFieldContainer[_peers_pb2.ToolAxisOverride]
    view: TaskView
    def __init__(self, request_id: _Optional[str] = ..., spec: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., document: _Optional[bytes] = ..., agent_id: _Optional[str] = ..., format: _Optional[_Union[_spec_service_pb2.DocumentFormat, str]] = ..., labels: _Optional[_Mapping[str, str]] = ..., interrupt_policy: _Optional[_Union[_hitl_pb2.InterruptPolicy, _Mapping]] = ..., mcp_servers: _Optional[_Union[_peers_pb2.McpServerList, _Mapping]] = ..., a2a_peers: _Optional[_Union[_peers_pb2.A2aPeerList, _Mapping]] = ..., tool_axes: _Optional[_Iterable[_Union[_peers_pb2.ToolAxisOverride, _Mapping]]] = ..., interrupt_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., session_id: _Optional[str] = ..., view: _Optional[_Union[TaskView, str]] = ..., queue: _Optional[str] = ..., input: _Optional[_Union[_task_pb2.Message, _Mapping]] = ..., priority: _Optional[int] = ..., concurrency: _Optional[_Union[_task_pb2.ConcurrencyLimit, _Mapping]] = ...) -> None: ...

class StartTaskResponse(_message.Message):
    __slots__ = ["created", "task"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    created: bool
    task: _task_pb2.Task
    def __init__(self, task: _Optional[_Union[_task_pb2.Task, _Mapping]] = ..., created: bool = ...) -> None: ...

class ToolOutput(_message.Message):
    __slots__ = ["call_id", "is_error", "result"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    is_error: bool
    result: _struct_pb2.Value
    def __init__(self, call_id: _Optional[str] = ..., result: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., is_error: bool = ...) -> None: ...

class ToolOutputs(_message.Message):
    __slots__ = ["outputs"]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    outputs: _containers.RepeatedCompositeFieldContainer[ToolOutput]
    def __init__(self, outputs: _Optional[_Iterable[_Union[ToolOutput, _Mapping]]] = ...) -> None: ...

class WatchTaskRequest(_message.Message):
    __slots__ = ["after_sequence", "task_id"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class WatchTaskResponse(_message.Message):
    __slots__ = ["caught_up", "event", "keepalive", "message_delta"]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    KEEPALIVE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_DELTA_FIELD_NUMBER: _ClassVar[int]
    caught_up: _task_pb2.StreamCaughtUp
    event: _task_pb2.TaskEvent
    keepalive: _task_pb2.StreamKeepalive
    message_delta: _task_pb2.MessageDelta
    def __init__(self, event: _Optional[_Union[_task_pb2.TaskEvent, _Mapping]] = ..., caught_up: _Optional[_Union[_task_pb2.StreamCaughtUp, _Mapping]] = ..., keepalive: _Optional[_Union[_task_pb2.StreamKeepalive, _Mapping]] = ..., message_delta: _Optional[_Union[_task_pb2.MessageDelta, _Mapping]] = ...) -> None: ...

class TaskView(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
