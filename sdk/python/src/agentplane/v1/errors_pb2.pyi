from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor
ERROR_REASON_APPROVAL_LINK_NOT_FOUND: ErrorReason
ERROR_REASON_AUTH_PERMISSION_DENIED: ErrorReason
ERROR_REASON_AUTH_UNAUTHENTICATED: ErrorReason
ERROR_REASON_BUDGET_EXCEEDED: ErrorReason
ERROR_REASON_COMPLIANCE_DENIED: ErrorReason
ERROR_REASON_CONFIG_LOCKED_KEY: ErrorReason
ERROR_REASON_DEADLINE_EXCEEDED: ErrorReason
ERROR_REASON_EVENT_INVALID: ErrorReason
ERROR_REASON_FIELD_NUMBER: _ClassVar[int]
ERROR_REASON_FLOW_RATE_LIMITED: ErrorReason
ERROR_REASON_INTERNAL: ErrorReason
ERROR_REASON_INTERRUPT_ALREADY_RESOLVED: ErrorReason
ERROR_REASON_INTERRUPT_ALREADY_VOTED: ErrorReason
ERROR_REASON_INTERRUPT_APPROVER_NOT_ELIGIBLE: ErrorReason
ERROR_REASON_INTERRUPT_ARGS_MISMATCH: ErrorReason
ERROR_REASON_INTERRUPT_EDIT_INVALID: ErrorReason
ERROR_REASON_INTERRUPT_NOT_FOUND: ErrorReason
ERROR_REASON_LEASE_LOST: ErrorReason
ERROR_REASON_LIMIT_CONCURRENCY: ErrorReason
ERROR_REASON_LIMIT_EXCEEDED: ErrorReason
ERROR_REASON_OBLIGATION_NOT_FOUND: ErrorReason
ERROR_REASON_PAGE_TOKEN_INVALID: ErrorReason
ERROR_REASON_POLICY_INVALID: ErrorReason
ERROR_REASON_REQUEST_CANCELED: ErrorReason
ERROR_REASON_REQUEST_INVALID: ErrorReason
ERROR_REASON_REQUEST_MALFORMED: ErrorReason
ERROR_REASON_ROUTE_NOT_FOUND: ErrorReason
ERROR_REASON_RULE_NOT_FOUND: ErrorReason
ERROR_REASON_SCHEDULE_ALREADY_EXISTS: ErrorReason
ERROR_REASON_SCHEDULE_INVALID: ErrorReason
ERROR_REASON_SCHEDULE_NOT_FOUND: ErrorReason
ERROR_REASON_SCHEDULE_REVISION_MISMATCH: ErrorReason
ERROR_REASON_SERVER_UNAVAILABLE: ErrorReason
ERROR_REASON_SPEC_INVALID: ErrorReason
ERROR_REASON_STORE_BACKUP_UNSUPPORTED: ErrorReason
ERROR_REASON_STORE_SCHEMA_MISMATCH: ErrorReason
ERROR_REASON_STORE_UNAVAILABLE: ErrorReason
ERROR_REASON_TASK_NOT_FOUND: ErrorReason
ERROR_REASON_TASK_REQUEST_ID_REUSED: ErrorReason
ERROR_REASON_TASK_TERMINAL: ErrorReason
ERROR_REASON_TASK_TOOL_OUTPUTS_MISMATCH: ErrorReason
ERROR_REASON_TASK_WRONG_STATE: ErrorReason
ERROR_REASON_TOOL_CALL_NOT_APPROVED: ErrorReason
ERROR_REASON_TOOL_RESULT_UNEXPECTED: ErrorReason
ERROR_REASON_UNSPECIFIED: ErrorReason
ERROR_REASON_VERDICT_INVALID: ErrorReason
ERROR_REASON_WEBHOOK_DELIVERY_NOT_FOUND: ErrorReason
error_reason: _descriptor.FieldDescriptor

class ErrorReasonOptions(_message.Message):
    __slots__ = ["codes", "retryable", "wire"]
    CODES_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    WIRE_FIELD_NUMBER: _ClassVar[int]
    codes: _containers.RepeatedScalarFieldContainer[str]
    retryable: bool
    wire: str
    def __init__(self, wire: _Optional[str] = ..., codes: _Optional[_Iterable[str]] = ..., retryable: bool = ...) -> None: ...

class ErrorReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
