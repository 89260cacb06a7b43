"""AgentplaneError: a failed call, decoded from its gRPC status and status details.

The details travel in the grpc-status-details-bin trailer as a serialized
google.rpc.Status; the SDK decodes it with its own copies of the google.rpc messages
(agentplane._rpc, kept out of protobuf's default pool), so it needs neither
grpcio-status nor googleapis-common-protos, and a program may import those beside it.
"""

from collections.abc import Iterable
from typing import Any

import grpc
from google.protobuf import any_pb2

from agentplane import _rpc
from agentplane.v1 import spec_service_pb2

_DETAILS_KEY = "grpc-status-details-bin"


class AgentplaneError(Exception):
    """A call that ended with a non-OK status.

    Attributes:
      code: the grpc.StatusCode.
      message: the status message.
      reason, domain, metadata: the google.rpc.ErrorInfo (empty when absent); reason is
        the stable value to branch on (docs/errors.md).
      spec_violations: the agentplane.v1.SpecViolation list of an invalid spec.
      field_violations: the google.rpc.BadRequest.FieldViolation list.
      precondition_violations: the google.rpc.PreconditionFailure.Violation list.
      retry_delay: seconds from google.rpc.RetryInfo, or None.
      details: every detail as a google.protobuf.Any, the unknown ones included.
    """

    def __init__(self, code: grpc.StatusCode, message: str, details: Iterable[any_pb2.Any] = ()) -> None:
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.details = list(details)
        self.reason = ""
        self.domain = ""
        self.metadata: dict[str, str] = {}
        self.spec_violations: list[spec_service_pb2.SpecViolation] = []
        # google.rpc.BadRequest.FieldViolation and PreconditionFailure.Violation messages
        # (of the SDK's private pool: agentplane._rpc), read by their fields.
        self.field_violations: list[Any] = []
        self.precondition_violations: list[Any] = []
        self.retry_delay: float | None = None
        for any_ in self.details:
            name = any_.TypeName()
            if name == "google.rpc.ErrorInfo":
                info: Any = _rpc.ErrorInfo.FromString(any_.value)
                self.reason, self.domain, self.metadata = info.reason, info.domain, dict(info.metadata)
            elif name == spec_service_pb2.SpecViolations.DESCRIPTOR.full_name:
                self.spec_violations.extend(spec_service_pb2.SpecViolations.FromString(any_.value).violations)
            elif name == "google.rpc.BadRequest":
                self.field_violations.extend(_rpc.BadRequest.FromString(any_.value).field_violations)
            elif name == "google.rpc.PreconditionFailure":
                self.precondition_violations.extend(_rpc.PreconditionFailure.FromString(any_.value).violations)
            elif name == "google.rpc.RetryInfo":
                d: Any = _rpc.RetryInfo.FromString(any_.value).retry_delay
                self.retry_delay = d.seconds + d.nanos / 1e9

    @classmethod
    def from_rpc_error(cls, err: grpc.RpcError) -> "AgentplaneError":
        """Decodes a grpc.RpcError (a grpc.Call) into an AgentplaneError."""
        call: Any = err  # the RpcError a call raises is also its grpc.Call
        code: grpc.StatusCode | None = call.code() if hasattr(call, "code") else grpc.StatusCode.UNKNOWN
        message: str | None = call.details() if hasattr(call, "details") else str(err)
        details: list[any_pb2.Any] = []
        trailers: Iterable[tuple[str, Any]] | None = (
            call.trailing_metadata() if hasattr(call, "trailing_metadata") else None)
        for key, value in trailers or ():
            if key == _DETAILS_KEY:
                st: Any = _rpc.Status.FromString(value)
                # As the default pool's Any, which has Is/Unpack for the caller's own types.
                details = [any_pb2.Any(type_url=d.type_url, value=d.value) for d in st.details]
                message = message or st.message
        e = cls(code or grpc.StatusCode.UNKNOWN, message or "", details)
        e.__cause__ = err
        return e
