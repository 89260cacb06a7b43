"""Client: every agentplane service over one gRPC channel.

Each service is an attribute (tasks, specs, hitl, runtime, admin, capabilities) whose
methods are the RPCs in snake_case. A method takes the request either as a message or
as keyword arguments of plain data (see agentplane._convert), returns the response
message (a generator of them for a server stream), and raises AgentplaneError for a
non-OK status. A request with an empty request_id gets a fresh one, so a call the
caller repeats with the same message is an idempotent retry.
"""

import importlib
import ipaddress
import re
import time
import uuid

import grpc

from agentplane import _convert
from agentplane.errors import AgentplaneError
from agentplane.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    capability_service_pb2,
    capability_service_pb2_grpc,
    hitl_service_pb2,
    hitl_service_pb2_grpc,
    runtime_service_pb2,
    runtime_service_pb2_grpc,
    spec_service_pb2,
    spec_service_pb2_grpc,
    task_service_pb2,
    task_service_pb2_grpc,
)


def new_request_id():
    """Returns a fresh idempotency key."""
    return str(uuid.uuid4())


def _loopback(address):
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    if host.startswith(("unix:", "unix-abstract:")):
        return True
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class _Service:
    """The RPCs of one service as methods."""

    def __init__(self, channel, pb2, pb2_grpc, service_name, metadata):
        desc = pb2.DESCRIPTOR.services_by_name[service_name]
        stub = getattr(pb2_grpc, service_name + "Stub")(channel)
        self._name = service_name
        for m in desc.methods:
            req_cls = _message_class(m.input_type)
            rpc = getattr(stub, m.name)
            streaming = m.server_streaming
            setattr(self, _snake(m.name), _make_method(rpc, req_cls, streaming, metadata, m.name))

    def __repr__(self):
        return f"<agentplane {self._name}>"


def _message_class(desc):
    # The class protoc generated for desc, in the module of desc's file.
    module = importlib.import_module(desc.file.name[: -len(".proto")].replace("/", ".") + "_pb2")
    cls = module
    for part in desc.full_name[len(desc.file.package) + 1 :].split("."):
        cls = getattr(cls, part)
    return cls


def _make_method(rpc, req_cls, streaming, metadata, name):
    has_request_id = "request_id" in req_cls.DESCRIPTOR.fields_by_name

    def build(request, fields):
        if request is None:
            request = _convert.fill(req_cls(), fields)
        elif fields:
            raise TypeError(f"{name}: pass either a request message or keyword fields, not both")
        if has_request_id and not request.request_id:
            request.request_id = new_request_id()
        return request

    if streaming:

        def method(request=None, *, timeout=None, **fields):
            req = build(request, fields)
            try:
                for resp in rpc(req, timeout=timeout, metadata=metadata):
                    yield resp
            except grpc.RpcError as err:
                raise AgentplaneError.from_rpc_error(err) from err

    else:

        def method(request=None, *, timeout=None, **fields):
            req = build(request, fields)
            try:
                return rpc(req, timeout=timeout, metadata=metadata)
            except grpc.RpcError as err:
                raise AgentplaneError.from_rpc_error(err) from err

    method.__name__ = _snake(name)
    method.__doc__ = f"Calls {name} ({req_cls.DESCRIPTOR.full_name})."
    return method


class Client:
    """A connection to an agentplane control plane.

    address: host:port of its gRPC listener. token: a bearer token sent on every call.
    tls: None for plaintext, True for TLS with the system roots, or a
    grpc.ChannelCredentials. options: extra grpc channel options. Like the Go client,
    it refuses to send a token in plaintext to a non-loopback address unless
    plaintext_token is true (for a TLS-terminating proxy in between).
    """

    def __init__(self, address, token=None, tls=None, options=None, plaintext_token=False):
        opts = list(options or [])
        if token and not tls and not plaintext_token and not _loopback(address):
            raise ValueError(f"refusing to send a token in plaintext to {address}: pass tls, or plaintext_token=True")
        if tls is None or tls is False:
            self._channel = grpc.insecure_channel(address, options=opts)
        else:
            creds = grpc.ssl_channel_credentials() if tls is True else tls
            self._channel = grpc.secure_channel(address, creds, options=opts)
        md = (("authorization", f"Bearer {token}"),) if token else None
        self.tasks = _Service(self._channel, task_service_pb2, task_service_pb2_grpc, "TaskService", md)
        self.specs = _Service(self._channel, spec_service_pb2, spec_service_pb2_grpc, "SpecService", md)
        self.hitl = _Service(self._channel, hitl_service_pb2, hitl_service_pb2_grpc, "HitlService", md)
        self.runtime = _Service(self._channel, runtime_service_pb2, runtime_service_pb2_grpc, "RuntimeService", md)
        self.admin = _Service(self._channel, admin_service_pb2, admin_service_pb2_grpc, "AdminService", md)
        self.capabilities = _Service(
            self._channel, capability_service_pb2, capability_service_pb2_grpc, "CapabilityService", md
        )

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def watch(self, task_id, after_sequence=0, *, keepalives=False, reconnect_for=30.0):
        """Yields the task's WatchTaskResponse messages after after_sequence.

        When the stream breaks with UNAVAILABLE (the server restarting, the connection
        dropped) it reconnects from the last event sequence it yielded, so the events
        come with no gap and no duplicate; it gives up (raising AgentplaneError) after
        reconnect_for seconds without a message. Keepalives are yielded only when
        keepalives is true. The generator ends when the task's stream ends (after its
        terminal event).
        """
        last = after_sequence
        backoff = 0.05
        broken_since = None
        while True:
            req = task_service_pb2.WatchTaskRequest(task_id=task_id, after_sequence=last)
            try:
                for resp in self.tasks.watch_task(req):
                    broken_since, backoff = None, 0.05
                    kind = resp.WhichOneof("kind")
                    if kind == "event":
                        if resp.event.sequence <= last:
                            continue
                        last = resp.event.sequence
                    elif kind == "keepalive" and not keepalives:
                        continue
                    yield resp
                return
            except AgentplaneError as err:
                if err.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                now = time.monotonic()
                broken_since = broken_since or now
                if now - broken_since > reconnect_for:
                    raise
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
