from agentplane.v1 import hitl_pb2 as _hitl_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Capabilities(_message.Message):
    __slots__ = ["a2a_injection", "compliance_posture", "decision_types", "denied_capabilities", "features", "limits", "locked_keys", "max_caller_peers", "mcp_injection", "principal", "require_principal", "server_version", "spec", "store"]
    A2A_INJECTION_FIELD_NUMBER: _ClassVar[int]
    COMPLIANCE_POSTURE_FIELD_NUMBER: _ClassVar[int]
    DECISION_TYPES_FIELD_NUMBER: _ClassVar[int]
    DENIED_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    LOCKED_KEYS_FIELD_NUMBER: _ClassVar[int]
    MAX_CALLER_PEERS_FIELD_NUMBER: _ClassVar[int]
    MCP_INJECTION_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STORE_FIELD_NUMBER: _ClassVar[int]
    a2a_injection: bool
    compliance_posture: str
    decision_types: _containers.RepeatedScalarFieldContainer[_hitl_pb2.DecisionType]
    denied_capabilities: _containers.RepeatedScalarFieldContainer[str]
    features: Features
    limits: Limits
    locked_keys: _containers.RepeatedScalarFieldContainer[str]
    max_caller_peers: int
    mcp_injection: bool
    principal: Principal
    require_principal: bool
    server_version: str
    spec: SpecVocabulary
    store: str
    def __init__(self, server_version: _Optional[str] = ..., store: _Optional[str] = ..., principal: _Optional[_Union[Principal, _Mapping]] = ..., require_principal: bool = ..., mcp_injection: bool = ..., a2a_injection: bool = ..., max_caller_peers: _Optional[int] = ..., locked_keys: _Optional[_Iterable[str]] = ..., compliance_posture: _Optional[str] = ..., denied_capabilities: _Optional[_Iterable[str]] = ..., spec: _Optional[_Union[SpecVocabulary, _Mapping]] = ..., decision_types: _Optional[_Iterable[_Union[_hitl_pb2.DecisionType, str]]] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ..., features: _Optional[_Union[Features, _Mapping]] = ...) -> None: ...

class Features(_message.Message):
    __slots__ = ["cel_policies", "chat_mode", "durable_interrupts", "hot_backup", "http_json", "idempotent_start", "runtime_leases", "schedules", "spec_validation", "tasks", "verdicts", "watch_resume"]
    CEL_POLICIES_FIELD_NUMBER: _ClassVar[int]
    CHAT_MODE_FIELD_NUMBER: _ClassVar[int]
    DURABLE_INTERRUPTS_FIELD_NUMBER: _ClassVar[int]
    HOT_BACKUP_FIELD_NUMBER: _ClassVar[int]
    HTTP_JSON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_START_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_LEASES_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    SPEC_VALIDATION_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    VERDICTS_FIELD_NUMBER: _ClassVar[int]
    WATCH_RESUME_FIELD_NUMBER: _ClassVar[int]
    cel_policies: bool
    chat_mode: bool
    durable_interrupts: bool
    hot_backup: bool
    http_json: bool
    idempotent_start: bool
    runtime_leases: bool
    schedules: bool
    spec_validation: bool
    tasks: bool
    verdicts: bool
    watch_resume: bool
    def __init__(self, spec_validation: bool = ..., tasks: bool = ..., watch_resume: bool = ..., idempotent_start: bool = ..., runtime_leases: bool = ..., durable_interrupts: bool = ..., cel_policies: bool = ..., verdicts: bool = ..., chat_mode: bool = ..., hot_backup: bool = ..., http_json: bool = ..., schedules: bool = ...) -> None: ...

class GetCapabilitiesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetCapabilitiesResponse(_message.Message):
    __slots__ = ["capabilities"]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    capabilities: Capabilities
    def __init__(self, capabilities: _Optional[_Union[Capabilities, _Mapping]] = ...) -> None: ...

class Limits(_message.Message):
    __slots__ = ["default_page_size", "max_awaits_per_principal", "max_calls_per_principal", "max_depth", "max_event_bytes", "max_events_per_report", "max_input_bytes", "max_labels", "max_list_response_bytes", "max_page_size", "max_request_bytes", "max_spec_bytes", "max_task_events", "max_task_history_bytes", "max_watches_per_principal"]
    DEFAULT_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_AWAITS_PER_PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    MAX_CALLS_PER_PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENTS_PER_REPORT_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_INPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_LABELS_FIELD_NUMBER: _ClassVar[int]
    MAX_LIST_RESPONSE_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_SPEC_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TASK_EVENTS_FIELD_NUMBER: _ClassVar[int]
    MAX_TASK_HISTORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_WATCHES_PER_PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    default_page_size: int
    max_awaits_per_principal: int
    max_calls_per_principal: int
    max_depth: int
    max_event_bytes: int
    max_events_per_report: int
    max_input_bytes: int
    max_labels: int
    max_list_response_bytes: int
    max_page_size: int
    max_request_bytes: int
    max_spec_bytes: int
    max_task_events: int
    max_task_history_bytes: int
    max_watches_per_principal: int
    def __init__(self, max_depth: _Optional[int] = ..., max_spec_bytes: _Optional[int] = ..., max_event_bytes: _Optional[int] = ..., max_task_history_bytes: _Optional[int] = ..., max_task_events: _Optional[int] = ..., max_request_bytes: _Optional[int] = ..., max_input_bytes: _Optional[int] = ..., max_labels: _Optional[int] = ..., max_list_response_bytes: _Optional[int] = ..., max_events_per_report: _Optional[int] = ..., max_calls_per_principal: _Optional[int] = ..., max_watches_per_principal: _Optional[int] = ..., max_awaits_per_principal: _Optional[int] = ..., default_page_size: _Optional[int] = ..., max_page_size: _Optional[int] = ...) -> None: ...

class Principal(_message.Message):
    __slots__ = ["roles", "subject", "tenant"]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    roles: _containers.RepeatedScalarFieldContainer[str]
    subject: str
    tenant: str
    def __init__(self, subject: _Optional[str] = ..., tenant: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ...) -> None: ...

class SpecVocabulary(_message.Message):
    __slots__ = ["api_versions", "edge_kinds", "hitl_modes", "instruction_presets", "kinds", "roles", "termination_kinds"]
    API_VERSIONS_FIELD_NUMBER: _ClassVar[int]
    EDGE_KINDS_FIELD_NUMBER: _ClassVar[int]
    HITL_MODES_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTION_PRESETS_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_KINDS_FIELD_NUMBER: _ClassVar[int]
    api_versions: _containers.RepeatedScalarFieldContainer[str]
    edge_kinds: _containers.RepeatedScalarFieldContainer[str]
    hitl_modes: _containers.RepeatedScalarFieldContainer[str]
    instruction_presets: _containers.RepeatedScalarFieldContainer[str]
    kinds: _containers.RepeatedScalarFieldContainer[str]
    roles: _containers.RepeatedScalarFieldContainer[str]
    termination_kinds: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, api_versions: _Optional[_Iterable[str]] = ..., kinds: _Optional[_Iterable[str]] = ..., roles: _Optional[_Iterable[str]] = ..., edge_kinds: _Optional[_Iterable[str]] = ..., hitl_modes: _Optional[_Iterable[str]] = ..., termination_kinds: _Optional[_Iterable[str]] = ..., instruction_presets: _Optional[_Iterable[str]] = ...) -> None: ...
