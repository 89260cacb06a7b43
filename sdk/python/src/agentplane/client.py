"""Client: every agentplane service over one gRPC channel.

Each service is a typed attribute (tasks, specs, hitl, runtime, admin, capabilities, schedules:
agentplane._services) whose attributes are the RPCs in snake_case. An RPC takes the
request either as a message or as keyword arguments of plain data (see
agentplane._convert), returns the response message (a Stream of them for a server
stream), and raises AgentplaneError for a non-OK status. A request with an empty
request_id is sent with a fresh one, chosen once per call and reused by its retries, as
in the Go client: each call is a new one, and the caller's message is left as it was. To
repeat a call of yours idempotently, set request_id yourself (new_request_id()) and send
it again.

Retries: a unary call whose RPC the API marks NO_SIDE_EFFECTS or IDEMPOTENT is made
again after UNAVAILABLE, DEADLINE_EXCEEDED or a retryable reason, with backoff, up to
agentplane._api.RETRY_ATTEMPTS calls within its timeout (which covers them all), and
watch reconnects: the policy of every agentplane SDK (agentplane._retry; docs/clients.md,
"Retries, request ids and reconnection").
"""

import ipaddress
import time
from collections.abc import Generator, Sequence
from typing import Any

import grpc

from agentplane import _api, _retry
from agentplane._calls import Metadata, Stream
from agentplane._ids import new_request_id
from agentplane._services import (
    AdminService,
    CapabilityService,
    HitlService,
    RuntimeService,
    ScheduleService,
    SpecService,
    TaskService,
)
from agentplane.errors import AgentplaneError
from agentplane.task import Helpers
from agentplane.v1 import task_service_pb2

__all__ = ["TLS", "Client", "Stream", "new_request_id"]

ChannelOptions = Sequence[tuple[str, Any]]

# Keepalive on every channel, as the TypeScript client has: a dead connection under a
# long poll, a watch or an AwaitDecision is noticed within about 30 s instead of hanging.
# Every 20 s, above the server's enforcement minimum (10 s); pings also go while no call
# carries data (a long poll that waits for work).
KEEPALIVE_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)


def _loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]") if ":" in address else address
    if host.startswith(("unix:", "unix-abstract:")):
        return True
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TLS:
    """TLS settings: PEM bytes or file paths for the CA bundle (default: the system
    roots), and the client certificate and key for mTLS (auth.client_certs);
    server_name is the name to verify the server certificate against when it differs
    from the address's host."""

    def __init__(self, ca: bytes | str | None = None, ca_file: str | None = None, cert: bytes | str | None = None,
                 cert_file: str | None = None, key: bytes | str | None = None, key_file: str | None = None,
                 server_name: str | None = None) -> None:
        self.ca = _pem(ca, ca_file)
        self.cert = _pem(cert, cert_file)
        self.key = _pem(key, key_file)
        self.server_name = server_name

    def credentials(self) -> grpc.ChannelCredentials:
        return grpc.ssl_channel_credentials(root_certificates=self.ca, private_key=self.key,
                                            certificate_chain=self.cert)


def _pem(value: bytes | str | None, path: str | None) -> bytes | None:
    if value is not None:
        return value.encode() if isinstance(value, str) else value
    if path is None:
        return None
    with open(path, "rb") as f:
        return f.read()


TLSArg = TLS | grpc.ChannelCredentials | bool | None


def channel_args(address: str, token: str | None, tls: TLSArg, options: ChannelOptions | None,
                 plaintext_token: bool) -> tuple[grpc.ChannelCredentials | None, list[tuple[str, Any]], Metadata]:
    """Returns (credentials or None, channel options, call metadata) for a Client or AsyncClient.
    The options are KEEPALIVE_OPTIONS, then the caller's, which replace a default of the same name."""
    mine = list(options or [])
    names = {name for name, _ in mine}
    opts: list[tuple[str, Any]] = [(n, v) for n, v in KEEPALIVE_OPTIONS if n not in names] + mine
    if token and not tls and not plaintext_token and not _loopback(address):
        raise ValueError(f"refusing to send a token in plaintext to {address}: pass tls, or plaintext_token=True")
    creds: grpc.ChannelCredentials | None = None
    if tls is True:
        creds = grpc.ssl_channel_credentials()
    elif isinstance(tls, TLS):
        creds = tls.credentials()
        if tls.server_name:
            opts.append(("grpc.ssl_target_name_override", tls.server_name))
    elif isinstance(tls, grpc.ChannelCredentials):
        creds = tls
    md: Metadata = (("authorization", f"Bearer {token}"),) if token else None
    return creds, opts, md


class Client(Helpers):
    """A connection to an agentplane control plane.

    address: host:port of its gRPC listener. token: a bearer token sent on every call.
    tls: None for plaintext, True for TLS with the system roots, a TLS (CA, client
    certificate, server name), or a grpc.ChannelCredentials. options: extra grpc
    channel options (they replace the keepalive defaults, KEEPALIVE_OPTIONS, of the
    same name). Like the Go client, it refuses to send a token in plaintext to a
    non-loopback address unless plaintext_token is true (for a TLS-terminating proxy in
    between).

    The services are typed attributes: tasks, specs, hitl, runtime, admin, capabilities,
    schedules.
    start(...) returns a TaskHandle (wait, watch, continue_, cancel), task(id) makes one for
    an existing task, and approve, reject, edit decide an interrupt (agentplane.task).
    """

    tasks: TaskService
    specs: SpecService
    hitl: HitlService
    runtime: RuntimeService
    admin: AdminService
    capabilities: CapabilityService
    schedules: ScheduleService

    def __init__(self, address: str, token: str | None = None, tls: TLSArg = None,
                 options: ChannelOptions | None = None, plaintext_token: bool = False) -> None:
        creds, opts, md = channel_args(address, token, tls, options, plaintext_token)
        if creds is None:
            self._channel = grpc.insecure_channel(address, options=opts)
        else:
            self._channel = grpc.secure_channel(address, creds, options=opts)
        self.tasks = TaskService(self._channel, md)
        self.specs = SpecService(self._channel, md)
        self.hitl = HitlService(self._channel, md)
        self.runtime = RuntimeService(self._channel, md)
        self.admin = AdminService(self._channel, md)
        self.capabilities = CapabilityService(self._channel, md)
        self.schedules = ScheduleService(self._channel, md)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def watch(self, task_id: str, after_sequence: int = 0, *, keepalives: bool = False,
              max_reconnects: int | None = None) -> Generator[task_service_pb2.WatchTaskResponse, None, None]:
        """Yields the task's WatchTaskResponse messages after after_sequence.

        When the stream breaks with an error the retry policy allows for WatchTask
        (UNAVAILABLE: the server restarting, the connection dropped; a retryable reason)
        it reconnects from the last event sequence it yielded, so the events come with no
        gap and no duplicate; it gives up (raising AgentplaneError) after max_reconnects
        (default agentplane._api.WATCH_RECONNECTS, 10) reopenings in a row without a
        message, backing off as calls do, once they have taken at least max_reconnects
        times the longest pause (BACKOFF_MAX: 20 s by default): gRPC backs off
        reconnecting a lost server by itself, and the reopenings it fails at once
        meanwhile must not use the budget up before the channel tries again. Go's
        Client.Watch does the same, TypeScript's watch counts the reopenings alone. Keepalives are yielded only when
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
    delivered, and the reopenings in a row without a message and since when they fail
    (shared by Client.watch and AsyncClient.watch)."""

    def __init__(self, after_sequence: int, keepalives: bool, max_reconnects: int | None = None) -> None:
        self.last = after_sequence
        self.keepalives = keepalives
        self.max_reconnects = _api.WATCH_RECONNECTS if max_reconnects is None else max_reconnects
        self.failures = 0
        self.failing = 0.0  # time.monotonic() when the first of the failures came

    def request(self, task_id: str) -> task_service_pb2.WatchTaskRequest:
        return task_service_pb2.WatchTaskRequest(task_id=task_id, after_sequence=self.last)

    def accept(self, resp: task_service_pb2.WatchTaskResponse) -> bool:
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

    def failed(self, err: AgentplaneError) -> float:
        """Returns the delay before reopening the watch after err, or raises err when it is
        final: not retryable, or max_reconnects reopenings that have taken
        max_reconnects * BACKOFF_MAX seconds at least."""
        if self.failures == 0:
            self.failing = time.monotonic()
        spent = time.monotonic() - self.failing >= self.max_reconnects * _api.BACKOFF_MAX
        if not _retry.retryable(WATCH_TASK, err) or (self.failures >= self.max_reconnects and spent):
            raise err
        self.failures += 1
        return _retry.delay(self.failures, err)
