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
from collections.abc import AsyncGenerator, Iterable
from typing import Any

import grpc
import grpc.aio

from agentplane import task as _task
from agentplane._services import (
    AsyncAdminService,
    AsyncCapabilityService,
    AsyncHitlService,
    AsyncRuntimeService,
    AsyncScheduleService,
    AsyncSpecService,
    AsyncTaskService,
)
from agentplane.client import ChannelOptions, Resume, TLSArg, channel_args
from agentplane.errors import AgentplaneError
from agentplane.v1 import hitl_pb2, task_pb2, task_service_pb2

__all__ = ["AsyncClient", "AsyncTaskHandle"]


class AsyncTaskHandle:
    """agentplane.task.TaskHandle on asyncio: the same calls as coroutines (watch an async
    generator). AsyncClient.start returns one, AsyncClient.task makes one."""

    def __init__(self, client: "AsyncClient", task_id: str,
                 started: task_service_pb2.StartTaskResponse | None = None) -> None:
        self._c = client
        self.id = task_id
        self.started = started

    def __repr__(self) -> str:
        return f"AsyncTaskHandle({self.id!r})"

    async def get(self) -> task_pb2.Task:
        """The task as it is now (a Task message)."""
        return (await self._c.tasks.get_task(task_id=self.id)).task

    def watch(self, after_sequence: int = 0, *, keepalives: bool = False,
              max_reconnects: int | None = None) -> AsyncGenerator[task_service_pb2.WatchTaskResponse, None]:
        """AsyncClient.watch for this task."""
        return self._c.watch(self.id, after_sequence, keepalives=keepalives, max_reconnects=max_reconnects)

    async def wait(self, until_input_required: bool = False) -> task_pb2.Task:
        """TaskHandle.wait: the task once terminal (or INPUT_REQUIRED, with the flag).
        Cancel the awaiting task to stop waiting."""
        first = True
        watch = self._c.watch(self.id)
        try:
            async for resp in watch:
                to = _task.changed_to(resp)
                if not first and (to is None or not _task.done(to, until_input_required)):
                    continue
                first = False
                task = await self.get()
                if _task.done(task.state, until_input_required):
                    return task
        finally:
            await watch.aclose()
        task = await self.get()
        if _task.done(task.state, until_input_required):
            return task
        raise RuntimeError(f"the watch of task {self.id} ended before it was done")

    async def cancel(self, reason: str = "", *, request_id: str | None = None) -> task_pb2.Task:
        """Cancels the task (CancelTask); returns the task."""
        return (await self._c.tasks.cancel_task(task_id=self.id, reason=reason, request_id=_task.rid(request_id))).task

    async def continue_(self, message: _task.MessageArg, *, request_id: str | None = None) -> task_pb2.Task:
        """Answers a chat pause with the user's next message (text, a Message or its dict)."""
        resp = await self._c.tasks.continue_task(
            task_id=self.id, request_id=_task.rid(request_id), **_task.continue_fields(message)
        )
        return resp.task

    async def continue_tool_outputs(self, outputs: Iterable[_task.ToolOutputArg], *,
                                    request_id: str | None = None) -> task_pb2.Task:
        """Sends the outputs of the client-executed tool calls the task waits for."""
        resp = await self._c.tasks.continue_task(
            task_id=self.id, request_id=_task.rid(request_id), tool_outputs={"outputs": list(outputs)}
        )
        return resp.task

    async def interrupts(self) -> list[hitl_pb2.Interrupt]:
        """The task's pending interrupts."""
        return list((await self._c.hitl.list_interrupts(task_id=self.id, **_task.PENDING)).interrupts)


class AsyncHelpers:
    """AsyncClient's start, task, approve, reject and edit: Client's, as coroutines."""

    tasks: AsyncTaskService
    hitl: AsyncHitlService

    async def start(self, request: task_service_pb2.StartTaskRequest | None = None, **fields: Any) -> AsyncTaskHandle:
        """Starts a task and returns its AsyncTaskHandle."""
        resp = await self.tasks.start_task(request, **fields)
        return AsyncTaskHandle(self._client(), resp.task.task_id, resp)

    def task(self, task_id: str) -> AsyncTaskHandle:
        """The AsyncTaskHandle of an existing task; makes no call."""
        return AsyncTaskHandle(self._client(), task_id)

    def _client(self) -> "AsyncClient":
        assert isinstance(self, AsyncClient)
        return self

    async def approve(self, interrupt_id: str, *, reason: str | None = None, request_id: str | None = None,
                      args_digest: str | None = None) -> hitl_pb2.Interrupt:
        """Client.approve: resolves against the interrupt's argument digest, with a request id."""
        return await self._resolve(_task.resolve_fields(interrupt_id, "approve", reason, None), request_id, args_digest)

    async def reject(self, interrupt_id: str, reason: str, *, request_id: str | None = None,
                     args_digest: str | None = None) -> hitl_pb2.Interrupt:
        """Client.reject."""
        return await self._resolve(_task.resolve_fields(interrupt_id, "reject", reason, None), request_id, args_digest)

    async def edit(self, interrupt_id: str, args: Any, *, reason: str | None = None, request_id: str | None = None,
                   args_digest: str | None = None) -> hitl_pb2.Interrupt:
        """Client.edit."""
        return await self._resolve(_task.resolve_fields(interrupt_id, "edit", reason, args), request_id, args_digest)

    async def _resolve(self, fields: dict[str, Any], request_id: str | None,
                       args_digest: str | None) -> hitl_pb2.Interrupt:
        if args_digest is None:
            args_digest = (await self.hitl.get_interrupt(interrupt_id=fields["interrupt_id"])).interrupt.args_digest
        resp = await self.hitl.resolve_interrupt(args_digest=args_digest, request_id=_task.rid(request_id), **fields)
        return resp.interrupt


class AsyncClient(AsyncHelpers):
    """A connection to an agentplane control plane on asyncio; the arguments are Client's.

    Create it inside a running event loop (grpc.aio channels belong to the loop).
    """

    tasks: AsyncTaskService
    specs: AsyncSpecService
    hitl: AsyncHitlService
    runtime: AsyncRuntimeService
    admin: AsyncAdminService
    capabilities: AsyncCapabilityService
    schedules: AsyncScheduleService

    def __init__(self, address: str, token: str | None = None, tls: TLSArg = None,
                 options: ChannelOptions | None = None, plaintext_token: bool = False) -> None:
        creds, opts, md = channel_args(address, token, tls, options, plaintext_token)
        if creds is None:
            self._channel = grpc.aio.insecure_channel(address, options=opts)
        else:
            self._channel = grpc.aio.secure_channel(address, creds, options=opts)
        self.tasks = AsyncTaskService(self._channel, md)
        self.specs = AsyncSpecService(self._channel, md)
        self.hitl = AsyncHitlService(self._channel, md)
        self.runtime = AsyncRuntimeService(self._channel, md)
        self.admin = AsyncAdminService(self._channel, md)
        self.capabilities = AsyncCapabilityService(self._channel, md)
        self.schedules = AsyncScheduleService(self._channel, md)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def watch(self, task_id: str, after_sequence: int = 0, *, keepalives: bool = False,
                    max_reconnects: int | None = None) -> AsyncGenerator[task_service_pb2.WatchTaskResponse, None]:
        """Yields the task's WatchTaskResponse messages after after_sequence: Client.watch
        as an async generator, resuming after a dropped connection from the last event it
        yielded (no gap, no duplicate)."""
        resume = Resume(after_sequence, keepalives, max_reconnects)
        while True:
            try:
                async for resp in self.tasks.watch_task(resume.request(task_id)):
                    if resume.accept(resp):
                        yield resp
                return
            except AgentplaneError as err:
                await asyncio.sleep(resume.failed(err))
