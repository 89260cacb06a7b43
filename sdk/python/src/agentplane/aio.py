"""AsyncClient: the Client of agentplane.client on asyncio (grpc.aio).

    from agentplane.aio import AsyncClient
    async with AsyncClient("127.0.0.1:7233") as c:
        task = (await c.tasks.start_task(agent_id="echo")).task
        async for m in c.watch(task.task_id):
            ...

The services and their methods are the same as Client's: a unary method is a
coroutine, a server-streaming one an async generator, and a failed call raises
AgentplaneError. Cancelling the task that awaits a call (or iterates a stream)
cancels the RPC.
"""

import asyncio

import grpc
import grpc.aio

from agentplane.client import SERVICES, Resume, _Service, channel_args, request_builder, snake
from agentplane.errors import AgentplaneError


def _make_async_method(rpc, req_cls, streaming, metadata, name):
    build = request_builder(req_cls, name)

    if streaming:

        async def method(request=None, *, timeout=None, **fields):
            req = build(request, fields)
            call = rpc(req, timeout=timeout, metadata=metadata)
            try:
                async for resp in call:
                    yield resp
            except grpc.RpcError as err:
                raise AgentplaneError.from_rpc_error(err) from err
            finally:
                call.cancel()  # a consumer that stops early ends the stream

    else:

        async def method(request=None, *, timeout=None, **fields):
            req = build(request, fields)
            try:
                return await rpc(req, timeout=timeout, metadata=metadata)
            except grpc.RpcError as err:
                raise AgentplaneError.from_rpc_error(err) from err

    method.__name__ = snake(name)
    method.__doc__ = f"Calls {name} ({req_cls.DESCRIPTOR.full_name})."
    return method


class AsyncClient:
    """A connection to an agentplane control plane on asyncio; the arguments are Client's.

    Create it inside a running event loop (grpc.aio channels belong to the loop).
    """

    def __init__(self, address, token=None, tls=None, options=None, plaintext_token=False):
        creds, opts, md = channel_args(address, token, tls, options, plaintext_token)
        if creds is None:
            self._channel = grpc.aio.insecure_channel(address, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(address, creds, options=opts)
        for attr, pb2, pb2_grpc, name in SERVICES:
            setattr(self, attr, _Service(self._channel, pb2, pb2_grpc, name, md, _make_async_method))

    async def close(self):
        await self._channel.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def watch(self, task_id, after_sequence=0, *, keepalives=False, reconnect_for=30.0):
        """Yields the task's WatchTaskResponse messages after after_sequence: Client.watch
        as an async generator, resuming after a dropped connection from the last event it
        yielded (no gap, no duplicate)."""
        resume = Resume(after_sequence, keepalives, reconnect_for)
        while True:
            try:
                async for resp in self.tasks.watch_task(resume.request(task_id)):
                    if resume.accept(resp):
                        yield resp
                return
            except AgentplaneError as err:
                await asyncio.sleep(resume.failed(err))
