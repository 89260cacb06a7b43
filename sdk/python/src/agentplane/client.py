"""Client: every agentplane service over one gRPC channel.

Each service is an attribute (tasks, specs, hitl, runtime, admin, capabilities) whose
methods are the RPCs in snake_case. A method takes the request either as a message or
as keyword arguments of plain data (see agentplane._convert), returns the response
message (a Stream of them for a server stream), and raises AgentplaneError for a
non-OK status. A request with an empty request_id is sent with a fresh one, chosen
once per call and reused by its retries, as in the Go client: each call is a new one,
and the caller's message is left as it was. To repeat a call of yours idempotently, set
request_id yourself (new_request_id()) and send it again.

Retries: a unary call whose RPC the API marks NO_SIDE_EFFECTS or IDEMPOTENT is made
again after UNAVAILABLE, DEADLINE_EXCEEDED or a retryable reason, with backoff, up to
agentplane._api.RETRY_ATTEMPTS calls within its timeout (which covers them all), and
watch reconnects: the policy of every agentplane SDK (agentplane._retry; docs/clients.md,
"Retries, request ids and reconnection").
"""

import importlib
import ipaddress
import re
import time
import uuid

import grpc

from agentplane import _api, _convert, _retry
from agentplane.errors import AgentplaneError
from agentplane.task import Helpers
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


def snake(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class _Service:
    """The RPCs of one service as methods."""

    def __init__(self, channel, pb2, pb2_grpc, service_name, metadata, make_method=None):
        desc = pb2.DESCRIPTOR.services_by_name[service_name]
        stub = getattr(pb2_grpc, service_name + "Stub")(channel)
        self._name = service_name
        for m in desc.methods:
            req_cls = _message_class(m.input_type)
            rpc = getattr(stub, m.name)
            streaming = m.server_streaming
            method = (make_method or _make_method)(rpc, req_cls, streaming, metadata, m.name, f"{desc.full_name}/{m.name}")
            setattr(self, snake(m.name), method)

    def __repr__(self):
        return f"<agentplane {self._name}>"


def _message_class(desc):
    # The class protoc generated for desc, in the module of desc's file.
    module = importlib.import_module(desc.file.name[: -len(".proto")].replace("/", ".") + "_pb2")
    cls = module
    for part in desc.full_name[len(desc.file.package) + 1 :].split("."):
        cls = getattr(cls, part)
    return cls


def request_builder(req_cls, name, key=None):
    """Returns build(request, fields): the request message from a message or keyword fields,
    with a fresh request_id when the RPC (key, "agentplane.v1.TaskService/StartTask") has
    that field and none is set. A caller's message is never modified: one without a
    request_id is copied (the Go client's rule). Called once per logical call, so its
    retries send the same id."""
    if key in _api.RPCS:
        has_request_id = _api.RPCS[key][1]
    else:
        has_request_id = "request_id" in req_cls.DESCRIPTOR.fields_by_name

    def build(request, fields):
        if request is None:
            request = _convert.fill(req_cls(), fields)
        elif fields:
            raise TypeError(f"{name}: pass either a request message or keyword fields, not both")
        elif has_request_id and not request.request_id:
            copy = req_cls()
            copy.CopyFrom(request)
            request = copy
        if has_request_id and not request.request_id:
            request.request_id = new_request_id()
        return request

    return build


def _make_method(rpc, req_cls, streaming, metadata, name, key=None):
    build = request_builder(req_cls, name, key)

    if streaming:

        def method(request=None, *, timeout=None, **fields):
            return Stream(rpc(build(request, fields), timeout=timeout, metadata=metadata))

    else:

        def method(request=None, *, timeout=None, **fields):
            req = build(request, fields)
            attempts = _retry.Attempts(key, timeout)
            while True:
                try:
                    return rpc(req, timeout=attempts.timeout(), metadata=metadata)
                except grpc.RpcError as err:
                    e = AgentplaneError.from_rpc_error(err)
                    pause = attempts.pause(e)
                    if pause is None:
                        raise e from err
                time.sleep(pause)

    method.__name__ = snake(name)
    method.__doc__ = f"Calls {name} ({req_cls.DESCRIPTOR.full_name})."
    return method


class Stream:
    """The responses of a server-streaming call: iterate it; a failure raises
    AgentplaneError. cancel() ends the call from any thread (the iteration then raises
    AgentplaneError with code CANCELLED)."""

    def __init__(self, call):
        self._call = call

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self._call)
        except grpc.RpcError as err:
            raise AgentplaneError.from_rpc_error(err) from err

    def cancel(self):
        self._call.cancel()


class TLS:
    """TLS settings: PEM bytes or file paths for the CA bundle (default: the system
    roots), and the client certificate and key for mTLS (auth.client_certs);
    server_name is the name to verify the server certificate against when it differs
    from the address's host."""

    def __init__(self, ca=None, ca_file=None, cert=None, cert_file=None, key=None, key_file=None, server_name=None):
        self.ca = _pem(ca, ca_file)
        self.cert = _pem(cert, cert_file)
        self.key = _pem(key, key_file)
        self.server_name = server_name

    def credentials(self):
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key,
                                            certificate_chain=self.cert)


def _pem(value, path):
    if value is not None:
        return value.encode() if isinstance(value, str) else value
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


def channel_args(address, token, tls, options, plaintext_token):
    """Returns (credentials or None, channel options, call metadata) for a Client or AsyncClient."""
    opts = list(options or [])
    if token and not tls and not plaintext_token and not _loopback(address):
        raise ValueError(f"refusing to send a token in plaintext to {address}: pass tls, or plaintext_token=True")
    creds = None
    if tls is True:
        creds = grpc.ssl_channel_credentials()
    elif isinstance(tls, TLS):
        creds = tls.credentials()
        if tls.server_name:
            opts.append(("grpc.ssl_target_name_override", tls.server_name))
    elif tls:
        creds = tls
    md = (("authorization", f"Bearer {token}"),) if token else None
    return creds, opts, md


SERVICES = (
    ("tasks", task_service_pb2, task_service_pb2_grpc, "TaskService"),
    ("specs", spec_service_pb2, spec_service_pb2_grpc, "SpecService"),
    ("hitl", hitl_service_pb2, hitl_service_pb2_grpc, "HitlService"),
    ("runtime", runtime_service_pb2, runtime_service_pb2_grpc, "RuntimeService"),
    ("admin", admin_service_pb2, admin_service_pb2_grpc, "AdminService"),
    ("capabilities", capability_service_pb2, capability_service_pb2_grpc, "CapabilityService"),
)


class Client(Helpers):
    """A connection to an agentplane control plane.

    address: host:port of its gRPC listener. token: a bearer token sent on every call.
    tls: None for plaintext, True for TLS with the system roots, a TLS (CA, client
    certificate, server name), or a grpc.ChannelCredentials. options: extra grpc
    channel options. Like the Go client,
    it refuses to send a token in plaintext to a non-loopback address unless
    plaintext_token is true (for a TLS-terminating proxy in between).

    start(...) returns a TaskHandle (wait, watch, continue_, cancel), task(id) makes one for
    an existing task, and approve, reject, edit decide an interrupt (agentplane.task).
    """

    def __init__(self, address, token=None, tls=None, options=None, plaintext_token=False):
        creds, opts, md = channel_args(address, token, tls, options, plaintext_token)
        if creds is None:
            self._channel = grpc.insecure_channel(address, options=opts)
        else:
            self._channel = grpc.secure_channel(address, creds, options=opts)
        for attr, pb2, pb2_grpc, name in SERVICES:
            setattr(self, attr, _Service(self._channel, pb2, pb2_grpc, name, md))

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def watch(self, task_id, after_sequence=0, *, keepalives=False, max_reconnects=None):
        """Yields the task's WatchTaskResponse messages after after_sequence.

        When the stream breaks with an error the retry policy allows for WatchTask
        (UNAVAILABLE: the server restarting, the connection dropped; a retryable reason)
        it reconnects from the last event sequence it yielded, so the events come with no
        gap and no duplicate; it gives up (raising AgentplaneError) after max_reconnects
        (default agentplane._api.WATCH_RECONNECTS, 10) reopenings in a row without a
        message, backing off as calls do. Go's Client.Watch and TypeScript's watch do the
        same. Keepalives are yielded only when
        keepalives is true. The generator ends when the task's stream ends (after its
        terminal event). AsyncClient.watch (agentplane.aio) is the same as an async
        generator.
        """
        resume = Resume(after_sequence, keepalives, max_reconnects)
        while True:
            stream = self.tasks.watch_task(resume.request(task_id))
            try:
                for resp in stream:
                    if resume.accept(resp):
                        yield resp
                return
            except AgentplaneError as err:
                time.sleep(resume.failed(err))
            finally:
                stream.cancel()  # a consumer that stops early ends the call


WATCH_TASK = "agentplane.v1.TaskService/WatchTask"


class Resume:
    """The state of a watch that survives dropped connections: the last event sequence
    delivered, and the reopenings in a row without a message (shared by Client.watch and
    AsyncClient.watch)."""

    def __init__(self, after_sequence, keepalives, max_reconnects=None):
        self.last = after_sequence
        self.keepalives = keepalives
        self.max_reconnects = _api.WATCH_RECONNECTS if max_reconnects is None else max_reconnects
        self.failures = 0

    def request(self, task_id):
        return task_service_pb2.WatchTaskRequest(task_id=task_id, after_sequence=self.last)

    def accept(self, resp):
        """Whether to yield resp: not an event delivered before a reconnection, nor an unwanted keepalive."""
        self.failures = 0
        kind = resp.WhichOneof("kind")
        if kind == "event":
            if resp.event.sequence <= self.last:
                return False
            self.last = resp.event.sequence
        elif kind == "keepalive" and not self.keepalives:
            return False
        return True

    def failed(self, err):
        """Returns the delay before reopening the watch after err, or raises err when it is final."""
        if not _retry.retryable(WATCH_TASK, err) or self.failures >= self.max_reconnects:
            raise err
        self.failures += 1
        return _retry.delay(self.failures, err)
