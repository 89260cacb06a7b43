"""The call objects of the typed service clients (agentplane._services).

An RPC is an object typed with its request and response messages: call it with the
request message or with the request's fields as keyword arguments (plain data, see
agentplane._convert), and timeout= (seconds). A request with an empty request_id is sent
with a fresh one on a copy, chosen once per call and reused by its retries, as in the Go
client: each call is a new one and the caller's message is left as it was. A unary call
whose RPC the API marks NO_SIDE_EFFECTS or IDEMPOTENT is made again after UNAVAILABLE,
DEADLINE_EXCEEDED or a retryable reason, with backoff, up to agentplane._api.RETRY_ATTEMPTS
calls, within its timeout, which covers them all (agentplane._retry: the policy of every
agentplane SDK; Unary.future makes one attempt). A non-OK status raises AgentplaneError.
"""

import asyncio
import time

from collections.abc import AsyncIterator, Iterator
from typing import Any, Generic, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message

from agentplane import _api, _convert, _retry
from agentplane.errors import AgentplaneError
from agentplane._ids import new_request_id

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)
Metadata = tuple[tuple[str, str], ...] | None


class _Call(Generic[Req, Resp]):
    def __init__(self, method: str, req: type[Req], resp: type[Resp], metadata: Metadata) -> None:
        self.method = method
        self.request_type = req
        self.response_type = resp
        self._metadata = metadata
        self._key = method.lstrip("/")  # "agentplane.v1.TaskService/StartTask", as in agentplane._api.RPCS
        rpc = _api.RPCS.get(self._key)
        self._has_request_id = rpc[1] if rpc is not None else "request_id" in req.DESCRIPTOR.fields_by_name

    def build(self, request: Req | None, fields: dict[str, Any]) -> Req:
        """The request to send: request (copied when it has no request_id) or one made
        from fields, with a fresh request_id when the message has that field and none is set."""
        if request is None:
            request = _convert.fill(self.request_type(), fields)
        elif fields:
            raise TypeError(f"{self.method}: pass either a request message or keyword fields, not both")
        elif self._has_request_id and not getattr(request, "request_id"):
            copy = self.request_type()
            copy.CopyFrom(request)
            request = copy
        if self._has_request_id and not getattr(request, "request_id"):
            setattr(request, "request_id", new_request_id())
        return request

    def __repr__(self) -> str:
        return f"<agentplane rpc {self.method}>"


class Unary(_Call[Req, Resp]):
    """A unary RPC: returns the response message."""

    def __init__(self, channel: grpc.Channel, method: str, req: type[Req], resp: type[Resp],
                 metadata: Metadata) -> None:
        super().__init__(method, req, resp, metadata)
        self._rpc: grpc.UnaryUnaryMultiCallable[Req, Resp] = channel.unary_unary(
            method, request_serializer=req.SerializeToString, response_deserializer=resp.FromString)

    def __call__(self, request: Req | None = None, *, timeout: float | None = None, **fields: Any) -> Resp:
        req = self.build(request, fields)
        attempts = _retry.Attempts(self._key, timeout)
        while True:
            try:
                return self._rpc(req, timeout=attempts.timeout(), metadata=self._metadata)
            except grpc.RpcError as err:
                e = AgentplaneError.from_rpc_error(err)
                pause = attempts.pause(e)
                if pause is None:
                    raise e from err
            time.sleep(pause)

    def future(self, request: Req | None = None, *, timeout: float | None = None, **fields: Any) -> "Pending[Resp]":
        """Starts the call and returns at once: Pending.result() waits for the response,
        Pending.cancel() ends the call from any thread."""
        return Pending(self._rpc.future(self.build(request, fields), timeout=timeout, metadata=self._metadata))


class Pending(Generic[Resp]):
    """A unary call under way (Unary.future)."""

    def __init__(self, fut: "grpc.Future[Resp]") -> None:
        self._fut = fut

    def result(self) -> Resp:
        """Waits for the response; raises AgentplaneError (CANCELLED after cancel())."""
        try:
            return self._fut.result()
        except grpc.RpcError as err:
            raise AgentplaneError.from_rpc_error(err) from err
        except grpc.FutureCancelledError as err:
            raise AgentplaneError(grpc.StatusCode.CANCELLED, "the call was cancelled") from err

    def cancel(self) -> None:
        self._fut.cancel()


class Stream(Generic[Resp]):
    """The responses of a server-streaming call: iterate it; a failure raises
    AgentplaneError. cancel() ends the call from any thread (the iteration then raises
    AgentplaneError with code CANCELLED)."""

    def __init__(self, call: Iterator[Resp], cancel: "grpc.Call") -> None:
        self._it = call
        self._call = cancel

    def __iter__(self) -> "Stream[Resp]":
        return self

    def __next__(self) -> Resp:
        try:
            return next(self._it)
        except grpc.RpcError as err:
            raise AgentplaneError.from_rpc_error(err) from err

    def cancel(self) -> None:
        self._call.cancel()


class ServerStream(_Call[Req, Resp]):
    """A server-streaming RPC: returns a Stream of response messages."""

    def __init__(self, channel: grpc.Channel, method: str, req: type[Req], resp: type[Resp],
                 metadata: Metadata) -> None:
        super().__init__(method, req, resp, metadata)
        self._rpc: grpc.UnaryStreamMultiCallable[Req, Resp] = channel.unary_stream(
            method, request_serializer=req.SerializeToString, response_deserializer=resp.FromString)

    def __call__(self, request: Req | None = None, *, timeout: float | None = None, **fields: Any) -> Stream[Resp]:
        call = self._rpc(self.build(request, fields), timeout=timeout, metadata=self._metadata)
        return Stream(call, call)


class AsyncUnary(_Call[Req, Resp]):
    """A unary RPC on asyncio: a coroutine returning the response message; cancelling the
    task that awaits it cancels the call."""

    def __init__(self, channel: grpc.aio.Channel, method: str, req: type[Req], resp: type[Resp],
                 metadata: Metadata) -> None:
        super().__init__(method, req, resp, metadata)
        self._rpc: grpc.aio.UnaryUnaryMultiCallable[Req, Resp] = channel.unary_unary(
            method, request_serializer=req.SerializeToString, response_deserializer=resp.FromString)

    async def __call__(self, request: Req | None = None, *, timeout: float | None = None, **fields: Any) -> Resp:
        req = self.build(request, fields)
        attempts = _retry.Attempts(self._key, timeout)
        while True:
            try:
                return await self._rpc(req, timeout=attempts.timeout(), metadata=self._metadata)
            except grpc.RpcError as err:
                e = AgentplaneError.from_rpc_error(err)
                pause = attempts.pause(e)
                if pause is None:
                    raise e from err
            await asyncio.sleep(pause)


class AsyncServerStream(_Call[Req, Resp]):
    """A server-streaming RPC on asyncio: an async generator of the response messages;
    closing it (or cancelling the task that iterates it) ends the call."""

    def __init__(self, channel: grpc.aio.Channel, method: str, req: type[Req], resp: type[Resp],
                 metadata: Metadata) -> None:
        super().__init__(method, req, resp, metadata)
        self._rpc: grpc.aio.UnaryStreamMultiCallable[Req, Resp] = channel.unary_stream(
            method, request_serializer=req.SerializeToString, response_deserializer=resp.FromString)

    async def __call__(self, request: Req | None = None, *, timeout: float | None = None,
                       **fields: Any) -> AsyncIterator[Resp]:
        call = self._rpc(self.build(request, fields), timeout=timeout, metadata=self._metadata)
        try:
            async for resp in call:
                yield resp
        except grpc.RpcError as err:
            raise AgentplaneError.from_rpc_error(err) from err
        finally:
            call.cancel()  # a consumer that stops early ends the stream
