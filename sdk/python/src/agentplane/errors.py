"""AgentplaneError: a failed call, decoded from its gRPC status and status details.

The details travel in the grpc-status-details-bin trailer as a serialized
google.rpc.Status; the SDK decodes it with its own copies of the google.rpc messages
(agentplane._rpc), so it needs neither grpcio-status nor googleapis-common-protos.
"""

import grpc

from agentplane._rpc.google.rpc import error_details_pb2, status_pb2
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

    def __init__(self, code, message, details=()):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message
        self.details = list(details)
        self.reason = ""
        self.domain = ""
        self.metadata = {}
        self.spec_violations = []
        self.field_violations = []
        self.precondition_violations = []
        self.retry_delay = None
        for any_ in self.details:
            if any_.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                info = error_details_pb2.ErrorInfo()
                any_.Unpack(info)
                self.reason, self.domain, self.metadata = info.reason, info.domain, dict(info.metadata)
            elif any_.Is(spec_service_pb2.SpecViolations.DESCRIPTOR):
                sv = spec_service_pb2.SpecViolations()
                any_.Unpack(sv)
                self.spec_violations.extend(sv.violations)
            elif any_.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                br = error_details_pb2.BadRequest()
                any_.Unpack(br)
                self.field_violations.extend(br.field_violations)
            elif any_.Is(error_details_pb2.PreconditionFailure.DESCRIPTOR):
                pf = error_details_pb2.PreconditionFailure()
                any_.Unpack(pf)
                self.precondition_violations.extend(pf.violations)
            elif any_.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                ri = error_details_pb2.RetryInfo()
                any_.Unpack(ri)
                self.retry_delay = ri.retry_delay.ToNanoseconds() / 1e9

    @classmethod
    def from_rpc_error(cls, err):
        """Decodes a grpc.RpcError (a grpc.Call) into an AgentplaneError."""
        code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
        message = err.details() if hasattr(err, "details") else str(err)
        details = []
        trailers = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
        for key, value in trailers or ():
            if key == _DETAILS_KEY:
                st = status_pb2.Status()
                st.ParseFromString(value)
                details = list(st.details)
                message = message or st.message
        e = cls(code or grpc.StatusCode.UNKNOWN, message or "", details)
        e.__cause__ = err
        return e
