"""The SDK beside googleapis-common-protos: both register google/rpc/*.proto.

googleapis-common-protos (pulled in by grpcio-status and google-api-core) registers its
google/rpc/status.proto and error_details.proto in protobuf's default pool; the default
pool refuses a second file of the same name. Each case runs in a fresh interpreter
(the default pool is per process): it registers files of those names, differing from
the SDK's copies as a newer googleapis does, before or after importing the SDK, then
decodes a status built with the googleapis-side classes.
"""

import json
import os
import subprocess
import sys
import unittest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

SCRIPT = r'''
import json, sys

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, duration_pb2, message_factory

F = descriptor_pb2.FieldDescriptorProto


def field(name, number, type_, label=F.LABEL_OPTIONAL, type_name=None):
    f = F(name=name, number=number, type=type_, label=label, json_name=name)
    if type_name:
        f.type_name = type_name
    return f


def message(name, *fields, nested=(), map_entry=False):
    m = descriptor_pb2.DescriptorProto(name=name, field=fields, nested_type=nested)
    if map_entry:
        m.options.map_entry = True
    return m


def googleapis_files():
    """google/rpc/status.proto and error_details.proto as googleapis-common-protos has them:
    the same names and numbers, with options and messages the SDK's copies lack."""
    status = descriptor_pb2.FileDescriptorProto(
        name="google/rpc/status.proto", package="google.rpc", syntax="proto3",
        dependency=["google/protobuf/any.proto"],
        message_type=[message(
            "Status", field("code", 1, F.TYPE_INT32), field("message", 2, F.TYPE_STRING),
            field("details", 3, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".google.protobuf.Any"))])
    status.options.java_package = "com.google.rpc"
    status.options.go_package = "google.golang.org/genproto/googleapis/rpc/status;status"
    details = descriptor_pb2.FileDescriptorProto(
        name="google/rpc/error_details.proto", package="google.rpc", syntax="proto3",
        dependency=["google/protobuf/duration.proto"],
        message_type=[
            message("ErrorInfo", field("reason", 1, F.TYPE_STRING), field("domain", 2, F.TYPE_STRING),
                    field("metadata", 3, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".google.rpc.ErrorInfo.MetadataEntry"),
                    nested=[message("MetadataEntry", field("key", 1, F.TYPE_STRING),
                                    field("value", 2, F.TYPE_STRING), map_entry=True)]),
            message("RetryInfo", field("retry_delay", 1, F.TYPE_MESSAGE, type_name=".google.protobuf.Duration")),
            message("DebugInfo", field("stack_entries", 1, F.TYPE_STRING, F.LABEL_REPEATED),
                    field("detail", 2, F.TYPE_STRING)),
            message("BadRequest",
                    field("field_violations", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED,
                          ".google.rpc.BadRequest.FieldViolation"),
                    nested=[message("FieldViolation", field("field", 1, F.TYPE_STRING),
                                    field("description", 2, F.TYPE_STRING), field("reason", 3, F.TYPE_STRING),
                                    field("localized_message", 4, F.TYPE_STRING))]),
        ])
    details.options.java_package = "com.google.rpc"
    return status, details


def register_googleapis():
    pool = descriptor_pool.Default()
    for f in googleapis_files():
        pool.AddSerializedFile(f.SerializeToString())  # as googleapis' *_pb2 modules do
    if hasattr(message_factory, "GetMessageClass"):
        return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
    factory = message_factory.MessageFactory(pool)
    return lambda name: factory.GetPrototype(pool.FindMessageTypeByName(name))


if sys.argv[1] == "before":
    cls = register_googleapis()
import agentplane, agentplane.aio, agentplane.worker  # noqa: E401
from agentplane import AgentplaneError
if sys.argv[1] == "after":
    cls = register_googleapis()

import grpc

ErrorInfo, BadRequest, RetryInfo = cls("google.rpc.ErrorInfo"), cls("google.rpc.BadRequest"), cls("google.rpc.RetryInfo")
st = cls("google.rpc.Status")(code=9, message="failed precondition")
st.details.add().Pack(ErrorInfo(reason="TASK_TERMINAL", domain="agentplane.dev", metadata={"task_id": "t1"}))
st.details.add().Pack(BadRequest(field_violations=[{"field": "input", "description": "empty"}]))
st.details.add().Pack(RetryInfo(retry_delay=duration_pb2.Duration(seconds=2, nanos=250000000)))


class FakeError(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.FAILED_PRECONDITION

    def details(self):
        return "failed precondition"

    def trailing_metadata(self):
        return (("grpc-status-details-bin", st.SerializeToString()),)


e = AgentplaneError.from_rpc_error(FakeError())
mine = ErrorInfo()
print(json.dumps({
    "reason": e.reason, "domain": e.domain, "metadata": e.metadata,
    "fields": [[v.field, v.description] for v in e.field_violations],
    "retry_delay": e.retry_delay,
    # e.details are the default pool's Any: the program's own googleapis classes unpack them.
    "unpacked": e.details[0].Is(ErrorInfo.DESCRIPTOR) and e.details[0].Unpack(mine) and mine.reason,
}))
'''


class GoogleapisBesideTest(unittest.TestCase):
    def run_case(self, when: str) -> None:
        env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.run([sys.executable, "-c", SCRIPT, when], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, f"googleapis' files registered {when} the SDK:\n{p.stderr}")
        self.assertEqual(json.loads(p.stdout), {
            "reason": "TASK_TERMINAL", "domain": "agentplane.dev", "metadata": {"task_id": "t1"},
            "fields": [["input", "empty"]], "retry_delay": 2.25, "unpacked": "TASK_TERMINAL",
        })

    def test_googleapis_registered_before_the_sdk(self):
        self.run_case("before")

    def test_googleapis_registered_after_the_sdk(self):
        self.run_case("after")


if __name__ == "__main__":
    unittest.main()
