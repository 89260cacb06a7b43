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
from agentplane import _retry
from agentplane import task as _task
from agentplane.errors import AgentplaneError


def _make_async_method(rpc, req_cls, streaming, metadata, name, key=None):
    build = request_builder(req_cls, name, key)

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
            attempts = _retry.Attempts(key, timeout)
            while True:
                try:
                    return await rpc(req, timeout=attempts.timeout(), metadata=metadata)
                except grpc.RpcError as err:
                    e = AgentplaneError.from_rpc_error(err)
                    pause = attempts.pause(e)
                    if pause is None:
                        raise e from err
                await asyncio.sleep(pause)

    method.__name__ = snake(name)
    method.__doc__ = f"Calls {name} ({req_cls.DESCRIPTOR.full_name})."
    return method


class AsyncTaskHandle:
    """agentplane.task.TaskHandle on asyncio: the same calls as coroutines (watch an async
    generator). AsyncClient.start returns one, AsyncClient.task makes one."""

    def __init__(self, client, task_id, started=None):
        self._c = client
        self.id = task_id
        self.started = started

    def __repr__(self):
        return f"AsyncTaskHandle({self.id!r})"

    async def get(self):
        """The task as it is now (a Task message)."""
        return (await self._c.tasks.get_task(task_id=self.id)).task

    def watch(self, after_sequence=0, **kw):
        """AsyncClient.watch for this task."""
        return self._c.watch(self.id, after_sequence, **kw)

    async def wait(self, until_input_required=False):
        """TaskHandle.wait: the task once terminal (or INPUT_REQUIRED, with the flag).
        Cancel the awaiting task to stop waiting."""
        first = True
        watch = self.watch()
        try:
            async for resp in watch:
                to = _task._changed_to(resp)
                if not first and (to is None or not _task._done(to, until_input_required)):
                    continue
                first = False
                task = await self.get()
                if _task._done(task.state, until_input_required):
                    return task
        finally:
            await watch.aclose()
        task = await self.get()
        if _task._done(task.state, until_input_required):
            return task
        raise RuntimeError(f"the watch of task {self.id} ended before it was done")

    async def cancel(self, reason="", *, request_id=None):
        """Cancels the task (CancelTask); returns the task."""
        return (await self._c.tasks.cancel_task(task_id=self.id, reason=reason, request_id=_task._rid(request_id))).task

    async def continue_(self, message, *, request_id=None):
        """Answers a chat pause with the user's next message (text, a Message or its dict)."""
        resp = await self._c.tasks.continue_task(
            task_id=self.id, request_id=_task._rid(request_id), **_task._continue_fields(message)
        )
        return resp.task

    async def continue_tool_outputs(self, outputs, *, request_id=None):
        """Sends the outputs of the client-executed tool calls the task waits for."""
        resp = await self._c.tasks.continue_task(
            task_id=self.id, request_id=_task._rid(request_id), tool_outputs={"outputs": list(outputs)}
        )
        return resp.task

    async def interrupts(self):
        """The task's pending interrupts."""
        return list((await self._c.hitl.list_interrupts(task_id=self.id, **_task._PENDING)).interrupts)


class AsyncHelpers:
    """AsyncClient's start, task, approve, reject and edit: Client's, as coroutines."""

    async def start(self, request=None, **fields):
        """Starts a task and returns its AsyncTaskHandle."""
        resp = await self.tasks.start_task(request, **fields)
        return AsyncTaskHandle(self, resp.task.task_id, resp)

    def task(self, task_id):
        """The AsyncTaskHandle of an existing task; makes no call."""
        return AsyncTaskHandle(self, task_id)

    async def approve(self, interrupt_id, *, reason=None, request_id=None, args_digest=None):
        """Client.approve: resolves against the interrupt's argument digest, with a request id."""
        return await self._resolve(_task._resolve_fields(interrupt_id, "approve", reason, None), request_id, args_digest)

    async def reject(self, interrupt_id, reason, *, request_id=None, args_digest=None):
        """Client.reject."""
        return await self._resolve(_task._resolve_fields(interrupt_id, "reject", reason, None), request_id, args_digest)

    async def edit(self, interrupt_id, args, *, reason=None, request_id=None, args_digest=None):
        """Client.edit."""
        return await self._resolve(_task._resolve_fields(interrupt_id, "edit", reason, args), request_id, args_digest)

    async def _resolve(self, fields, request_id, args_digest):
        if args_digest is None:
            args_digest = (await self.hitl.get_interrupt(interrupt_id=fields["interrupt_id"])).interrupt.args_digest
        resp = await self.hitl.resolve_interrupt(args_digest=args_digest, request_id=_task._rid(request_id), **fields)
        return resp.interrupt


class AsyncClient(AsyncHelpers):
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

    async def watch(self, task_id, after_sequence=0, *, keepalives=False, max_reconnects=None):
        """Yields the task's WatchTaskResponse messages after after_sequence: Client.watch
        as an async generator, resuming after a dropped connection from the last event it
        yielded (no gap, no duplicate), with the same policy."""
        resume = Resume(after_sequence, keepalives, max_reconnects)
        while True:
            try:
                async for resp in self.tasks.watch_task(resume.request(task_id)):
                    if resume.accept(resp):
                        yield resp
                return
            except AgentplaneError as err:
                await asyncio.sleep(resume.failed(err))
