from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentSpec(_message.Message):
    __slots__ = ["api_version", "auto_pause_on_turn_end", "content_trust", "custom_code", "deps_schema", "excluded_tools", "instructions", "kind", "model", "name", "output_schema", "skills", "spawnable_agents", "tools", "use_managed_tools"]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTO_PAUSE_ON_TURN_END_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TRUST_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_CODE_FIELD_NUMBER: _ClassVar[int]
    DEPS_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    EXCLUDED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    SPAWNABLE_AGENTS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    USE_MANAGED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    auto_pause_on_turn_end: bool
    content_trust: ContentTrustPolicy
    custom_code: _struct_pb2.Value
    deps_schema: JsonSchemaSpec
    excluded_tools: _containers.RepeatedScalarFieldContainer[str]
    instructions: Instructions
    kind: str
    model: str
    name: str
    output_schema: OutputSchemaSpec
    skills: _containers.RepeatedCompositeFieldContainer[SkillRef]
    spawnable_agents: _containers.RepeatedCompositeFieldContainer[SpawnableAgentRef]
    tools: _containers.RepeatedCompositeFieldContainer[FunctionTool]
    use_managed_tools: bool
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., instructions: _Optional[_Union[Instructions, _Mapping]] = ..., model: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[FunctionTool, _Mapping]]] = ..., use_managed_tools: bool = ..., excluded_tools: _Optional[_Iterable[str]] = ..., output_schema: _Optional[_Union[OutputSchemaSpec, _Mapping]] = ..., deps_schema: _Optional[_Union[JsonSchemaSpec, _Mapping]] = ..., skills: _Optional[_Iterable[_Union[SkillRef, _Mapping]]] = ..., spawnable_agents: _Optional[_Iterable[_Union[SpawnableAgentRef, _Mapping]]] = ..., custom_code: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., content_trust: _Optional[_Union[ContentTrustPolicy, _Mapping]] = ..., auto_pause_on_turn_end: bool = ...) -> None: ...

class ContentTrustPolicy(_message.Message):
    __slots__ = ["bulletin_post_policy", "evaluator_rationale_policy", "hitl_reason_policy", "max_trusted_bytes", "max_untrusted_bytes", "tool_output_policy"]
    BULLETIN_POST_POLICY_FIELD_NUMBER: _ClassVar[int]
    EVALUATOR_RATIONALE_POLICY_FIELD_NUMBER: _ClassVar[int]
    HITL_REASON_POLICY_FIELD_NUMBER: _ClassVar[int]
    MAX_TRUSTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_UNTRUSTED_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOOL_OUTPUT_POLICY_FIELD_NUMBER: _ClassVar[int]
    bulletin_post_policy: str
    evaluator_rationale_policy: str
    hitl_reason_policy: str
    max_trusted_bytes: int
    max_untrusted_bytes: int
    tool_output_policy: str
    def __init__(self, evaluator_rationale_policy: _Optional[str] = ..., hitl_reason_policy: _Optional[str] = ..., tool_output_policy: _Optional[str] = ..., bulletin_post_policy: _Optional[str] = ..., max_untrusted_bytes: _Optional[int] = ..., max_trusted_bytes: _Optional[int] = ...) -> None: ...

class EdgeOnError(_message.Message):
    __slots__ = ["abort", "route_to"]
    ABORT_FIELD_NUMBER: _ClassVar[int]
    ROUTE_TO_FIELD_NUMBER: _ClassVar[int]
    abort: bool
    route_to: str
    def __init__(self, abort: bool = ..., route_to: _Optional[str] = ...) -> None: ...

class FunctionDef(_message.Message):
    __slots__ = ["annotations", "description", "name", "parameters", "strict"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    annotations: McpToolAnnotations
    description: str
    name: str
    parameters: _struct_pb2.Struct
    strict: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., strict: bool = ..., annotations: _Optional[_Union[McpToolAnnotations, _Mapping]] = ...) -> None: ...

class FunctionTool(_message.Message):
    __slots__ = ["function", "type"]
    FUNCTION_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    function: FunctionDef
    type: str
    def __init__(self, type: _Optional[str] = ..., function: _Optional[_Union[FunctionDef, _Mapping]] = ...) -> None: ...

class GraphAgent(_message.Message):
    __slots__ = ["auto_pause_on_turn_end", "hitl", "role", "spec"]
    AUTO_PAUSE_ON_TURN_END_FIELD_NUMBER: _ClassVar[int]
    HITL_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    auto_pause_on_turn_end: bool
    hitl: str
    role: str
    spec: NodeSpec
    def __init__(self, spec: _Optional[_Union[NodeSpec, _Mapping]] = ..., role: _Optional[str] = ..., hitl: _Optional[str] = ..., auto_pause_on_turn_end: bool = ...) -> None: ...

class GraphBudget(_message.Message):
    __slots__ = ["total_input_tokens", "total_output_tokens", "total_wall_clock_s"]
    TOTAL_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_WALL_CLOCK_S_FIELD_NUMBER: _ClassVar[int]
    total_input_tokens: int
    total_output_tokens: int
    total_wall_clock_s: float
    def __init__(self, total_input_tokens: _Optional[int] = ..., total_output_tokens: _Optional[int] = ..., total_wall_clock_s: _Optional[float] = ...) -> None: ...

class GraphEdge(_message.Message):
    __slots__ = ["from_node", "kind", "on_error", "to_node"]
    FROM_NODE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ON_ERROR_FIELD_NUMBER: _ClassVar[int]
    TO_NODE_FIELD_NUMBER: _ClassVar[int]
    from_node: str
    kind: str
    on_error: EdgeOnError
    to_node: str
    def __init__(self, from_node: _Optional[str] = ..., to_node: _Optional[str] = ..., kind: _Optional[str] = ..., on_error: _Optional[_Union[EdgeOnError, _Mapping]] = ...) -> None: ...

class GraphLimits(_message.Message):
    __slots__ = ["budget", "max_depth", "max_steps", "per_agent_iterations"]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    MAX_DEPTH_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    PER_AGENT_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    budget: GraphBudget
    max_depth: int
    max_steps: int
    per_agent_iterations: int
    def __init__(self, max_steps: _Optional[int] = ..., max_depth: _Optional[int] = ..., per_agent_iterations: _Optional[int] = ..., budget: _Optional[_Union[GraphBudget, _Mapping]] = ...) -> None: ...

class GraphSpec(_message.Message):
    __slots__ = ["agents", "api_version", "auto_pause_on_turn_end_default", "content_trust", "deps_schema", "edges", "entry", "hitl_default", "kind", "limits", "name", "output_schema", "parent_close_policy", "termination"]
    class AgentsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: GraphAgent
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[GraphAgent, _Mapping]] = ...) -> None: ...
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    AUTO_PAUSE_ON_TURN_END_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TRUST_FIELD_NUMBER: _ClassVar[int]
    DEPS_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    EDGES_FIELD_NUMBER: _ClassVar[int]
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    HITL_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PARENT_CLOSE_POLICY_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.MessageMap[str, GraphAgent]
    api_version: str
    auto_pause_on_turn_end_default: bool
    content_trust: ContentTrustPolicy
    deps_schema: JsonSchemaSpec
    edges: _containers.RepeatedCompositeFieldContainer[GraphEdge]
    entry: str
    hitl_default: str
    kind: str
    limits: GraphLimits
    name: str
    output_schema: OutputSchemaSpec
    parent_close_policy: _struct_pb2.Value
    termination: _containers.RepeatedCompositeFieldContainer[TerminationCondition]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., agents: _Optional[_Mapping[str, GraphAgent]] = ..., edges: _Optional[_Iterable[_Union[GraphEdge, _Mapping]]] = ..., entry: _Optional[str] = ..., limits: _Optional[_Union[GraphLimits, _Mapping]] = ..., termination: _Optional[_Iterable[_Union[TerminationCondition, _Mapping]]] = ..., output_schema: _Optional[_Union[OutputSchemaSpec, _Mapping]] = ..., deps_schema: _Optional[_Union[JsonSchemaSpec, _Mapping]] = ..., hitl_default: _Optional[str] = ..., auto_pause_on_turn_end_default: bool = ..., parent_close_policy: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., content_trust: _Optional[_Union[ContentTrustPolicy, _Mapping]] = ...) -> None: ...

class Instructions(_message.Message):
    __slots__ = ["preset", "text"]
    PRESET_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    preset: InstructionsPreset
    text: str
    def __init__(self, text: _Optional[str] = ..., preset: _Optional[_Union[InstructionsPreset, _Mapping]] = ...) -> None: ...

class InstructionsPreset(_message.Message):
    __slots__ = ["append", "preset"]
    APPEND_FIELD_NUMBER: _ClassVar[int]
    PRESET_FIELD_NUMBER: _ClassVar[int]
    append: str
    preset: str
    def __init__(self, preset: _Optional[str] = ..., append: _Optional[str] = ...) -> None: ...

class JsonSchemaSpec(_message.Message):
    __slots__ = ["name", "schema", "strict"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema: _struct_pb2.Struct
    strict: bool
    def __init__(self, name: _Optional[str] = ..., schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., strict: bool = ...) -> None: ...

class McpToolAnnotations(_message.Message):
    __slots__ = ["destructive_hint", "idempotent_hint", "open_world_hint", "read_only_hint", "title"]
    DESTRUCTIVE_HINT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_HINT_FIELD_NUMBER: _ClassVar[int]
    OPEN_WORLD_HINT_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_HINT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    destructive_hint: bool
    idempotent_hint: bool
    open_world_hint: bool
    read_only_hint: bool
    title: str
    def __init__(self, title: _Optional[str] = ..., read_only_hint: bool = ..., destructive_hint: bool = ..., idempotent_hint: bool = ..., open_world_hint: bool = ...) -> None: ...

class NodeSpec(_message.Message):
    __slots__ = ["agent", "graph", "static_agent"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    STATIC_AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: AgentSpec
    graph: GraphSpec
    static_agent: StaticAgentRef
    def __init__(self, agent: _Optional[_Union[AgentSpec, _Mapping]] = ..., graph: _Optional[_Union[GraphSpec, _Mapping]] = ..., static_agent: _Optional[_Union[StaticAgentRef, _Mapping]] = ...) -> None: ...

class OutputSchemaSpec(_message.Message):
    __slots__ = ["json_schema"]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    json_schema: JsonSchemaSpec
    def __init__(self, json_schema: _Optional[_Union[JsonSchemaSpec, _Mapping]] = ...) -> None: ...

class SkillRef(_message.Message):
    __slots__ = ["config", "name", "vendor", "version"]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VENDOR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    config: _struct_pb2.Struct
    name: str
    vendor: str
    version: str
    def __init__(self, vendor: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[str] = ..., config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class SpawnableAgentRef(_message.Message):
    __slots__ = ["agent_id", "name", "spec"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    name: str
    spec: AgentSpec
    def __init__(self, name: _Optional[str] = ..., agent_id: _Optional[str] = ..., spec: _Optional[_Union[AgentSpec, _Mapping]] = ...) -> None: ...

class StaticAgentRef(_message.Message):
    __slots__ = ["agent_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class SubgraphAllocation(_message.Message):
    __slots__ = ["input_tokens", "max_steps", "output_tokens", "wall_clock_s"]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    WALL_CLOCK_S_FIELD_NUMBER: _ClassVar[int]
    input_tokens: int
    max_steps: int
    output_tokens: int
    wall_clock_s: float
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., wall_clock_s: _Optional[float] = ..., max_steps: _Optional[int] = ...) -> None: ...

class TerminationCondition(_message.Message):
    __slots__ = ["agent", "kind"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    agent: str
    kind: str
    def __init__(self, kind: _Optional[str] = ..., agent: _Optional[str] = ...) -> None: ...

class VerdictResult(_message.Message):
    __slots__ = ["confidence", "rationale", "scores", "verdict"]
    class ScoresEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _struct_pb2.Value
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    RATIONALE_FIELD_NUMBER: _ClassVar[int]
    SCORES_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    confidence: float
    rationale: str
    scores: _containers.MessageMap[str, _struct_pb2.Value]
    verdict: str
    def __init__(self, verdict: _Optional[str] = ..., confidence: _Optional[float] = ..., rationale: _Optional[str] = ..., scores: _Optional[_Mapping[str, _struct_pb2.Value]] = ...) -> None: ...
