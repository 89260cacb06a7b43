"""The google.rpc messages the error decoder reads, in a descriptor pool of their own.

googleapis-common-protos (which grpcio-status and google-api-core pull in) registers its
google/rpc/status.proto and error_details.proto in protobuf's default pool, and the
default pool refuses a second file of the same name, whichever comes second. So the
SDK's copies (sdk/python/proto, built into google_rpc.binpb by `sdk/python/ci.sh gen`)
are never registered there: they are loaded into a private pool here, and their
classes are made from it. Decoding needs only the names and field numbers, which the
copies share with googleapis.

Status, ErrorInfo, RetryInfo, BadRequest, PreconditionFailure and QuotaFailure are
those classes. They are not the classes googleapis-common-protos would give: decode a
google.protobuf.Any by its type name, not with Any.Is/Unpack against them.
"""

from importlib import resources
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message

_pool = descriptor_pool.DescriptorPool()
for _file in descriptor_pb2.FileDescriptorSet.FromString(
    resources.files(__name__).joinpath("google_rpc.binpb").read_bytes()
).file:  # buf build writes the files in dependency order
    _pool.AddSerializedFile(_file.SerializeToString())


def _message(name: str) -> Any:
    # The class is made at run time: typed Any, which the callers read as the google.rpc message it is.
    desc = _pool.FindMessageTypeByName(name)
    if hasattr(message_factory, "GetMessageClass"):  # protobuf 4.22 and later
        return message_factory.GetMessageClass(desc)
    factory: Any = message_factory.MessageFactory(_pool)  # protobuf 4.21
    cls: type[Message] = factory.GetPrototype(desc)
    return cls


Status: Any = _message("google.rpc.Status")
ErrorInfo: Any = _message("google.rpc.ErrorInfo")
RetryInfo: Any = _message("google.rpc.RetryInfo")
BadRequest: Any = _message("google.rpc.BadRequest")
PreconditionFailure: Any = _message("google.rpc.PreconditionFailure")
QuotaFailure: Any = _message("google.rpc.QuotaFailure")
