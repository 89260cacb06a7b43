"""AsyncWorker: the runtime's lease loop on asyncio, beside the threaded agentplane.worker.

    from agentplane.aio import AsyncClient
    from agentplane.async_worker import AsyncTask, AsyncWorker

    async def agent(task: AsyncTask) -> None:
        gate = await task.tool_call("c1", "delete_file", '{"path": "/tmp/x"}')
        ...
        await task.complete(text="done")

    async with AsyncClient("127.0.0.1:7233") as c, AsyncWorker(c, agent, "my-runtime"):
        await asyncio.Event().wait()          # or: await worker.run_until_signal()

The semantics are the threaded Worker's (and Go's client/worker): each leased task runs
handler(task), an `async def`, in an asyncio task of its own; it is heartbeaten once
before the handler runs and then in the background; its writes carry request ids and are
repeated after a transient failure while the lease may still be renewed.

Cancellation is asyncio's: when the task stops being this runtime's (a heartbeat says it
was canceled, the lease is lost, or stop()'s drain time ran out) the worker cancels the
handler's asyncio task, so the handler's current `await` raises asyncio.CancelledError
(clean up in `finally`; task.stop_reason says why: "canceled", "lease_lost",
"stopping", as in every SDK). Its writes after that raise TaskStopped. The worker then writes what the
handler contract says (a task stopped by the drain deadline is handed back: suspended
when it was waiting for a decision, returned to the queue otherwise); an exception from
the handler fails the task (or the reason and retry of a Failure).

`async with AsyncWorker(...)` starts run() in the background and, on the way out, stop()s
it (drain, then hand back) and waits for it; run_until_signal() does that on SIGTERM or
SIGINT. The defaults are Worker's: a 20 s long poll that stop() cuts short, a deadline on
every call, keepalive on the client's channel.
"""

# AsyncWorker and AsyncTask are one unit: the worker reads and sets the task's private state.
# pyright: reportPrivateUsage=false

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from agentplane._api import StopReason as _Stop
from agentplane._calls import AsyncUnary
from agentplane._ids import new_request_id
from agentplane.aio import AsyncClient
from agentplane.enums import GateOutcome, InterruptState
from agentplane.errors import AgentplaneError
from agentplane.v1 import hitl_pb2, runtime_service_pb2, task_pb2
from agentplane.worker import (
    _LOST_ON_THE_WAY,
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_POLL_WAIT,
    DEFAULT_WRITE_TIMEOUT,
    POLL_GRACE,
    STEP_ATTR,
    STEP_RESULT_ATTR,
    Delivery,
    EventArg,
    Failure,
    Gate,
    ModelCallRejected,
    StopReason,
    Suspended,
    Task,
    TaskStopped,
    _backoff,
    _by_call_id,
    _retryable,
    _stop_cause,
    check_options,
)

__all__ = ["AsyncHandler", "AsyncTask", "AsyncWorker", "Failure", "Gate", "ModelCallRejected", "Suspended", "TaskStopped"]

_T = TypeVar("_T")
_R = TypeVar("_R", bound=Message)


class AsyncTask:
    """One leased task, handed to the async handler: Worker's Task with coroutines."""

    def __init__(self, worker: "AsyncWorker", lease: runtime_service_pb2.Lease) -> None:
        self.client = worker.client
        self.lease = lease
        self.task_id = lease.task.task_id
        self.ref: dict[str, Any] = {"task_id": self.task_id, "lease_id": lease.lease_id, "epoch": lease.epoch}
        self.canceled = asyncio.Event()
        self.stop_reason: StopReason = ""
        self.ended = ""
        self.deadline = lease.deadline.ToNanoseconds() / 1e9 if lease.HasField("deadline") else time.time() + 30
        self._delivery = worker.delivery
        self._write_timeout = worker.write_timeout
        self.agent_name = lease.spec.agent.name if lease.spec.WhichOneof("spec") == "agent" else ""
        self._resolved = _by_call_id(lease.resolved_interrupts)
        self._pending = _by_call_id(lease.pending_interrupts)
        self._waiting = False  # in await_decision
        self._wait_stopped = False  # the worker's stop ended an interactive wait
        self._steps: dict[str, str] | None = None
        self._handler: asyncio.Task[None] | None = None

    def __repr__(self) -> str:
        return f"AsyncTask({self.task_id!r})"

    @property
    def attempt(self) -> int:
        """The attempt number of this lease, from 1."""
        return self.lease.attempt

    @property
    def continue_messages(self) -> list[task_pb2.Message]:
        """The user messages ContinueTask delivered since the task last paused (chat mode)."""
        return list(self.lease.continue_messages)

    @property
    def continue_tool_results(self) -> list[task_pb2.ToolResult]:
        """The outputs of client-executed tool calls ContinueTask delivered (wait_for_tool_outputs)."""
        return list(self.lease.continue_tool_results)

    @property
    def input_text(self) -> str:
        """The text parts of the task's input, joined."""
        return "".join(p.text for p in self.lease.task.input.parts if p.WhichOneof("kind") == "text")

    def _stop(self, why: StopReason) -> None:
        """The task is no longer ours: say why, and cancel the handler's asyncio task."""
        if self.canceled.is_set():
            return
        self.stop_reason = why
        if why == _Stop.STOPPING and self._waiting:
            self._wait_stopped = True
        self.canceled.set()
        h = self._handler
        if h is not None and h is not asyncio.current_task() and not h.done():
            h.cancel(f"agentplane: task {self.task_id} stopped ({why})")

    async def _write(self, call: AsyncUnary[Any, _R], end: str = "", force: bool = False, **fields: Any) -> _R:
        """Worker Task._write on asyncio: one fenced call, repeated after a transient failure
        with the same fields until the lease deadline; LEASE_LOST and TASK_TERMINAL stop the task."""
        if self.ended:
            raise RuntimeError(f"the task was already ended by this runtime ({self.ended})")
        failures = 0
        while True:
            if self.canceled.is_set() and not force:
                raise TaskStopped(self.stop_reason)
            try:
                resp = await call(lease=self.ref, timeout=self._write_timeout, **fields)
                if end:
                    self.ended = end
                return resp
            except AgentplaneError as e:
                cause = _stop_cause(e)
                if cause:
                    self._stop(cause)
                    raise TaskStopped(cause) from e
                if not _retryable(e):
                    raise
                left = self.deadline - time.time()
                if left <= 0:
                    if force:
                        raise
                    self._stop(_Stop.LEASE_LOST)
                    raise TaskStopped(_Stop.LEASE_LOST) from e
                failures += 1
                delay = min(_backoff(failures), left)
                if force:
                    await asyncio.sleep(delay)
                else:
                    try:
                        await asyncio.wait_for(self.canceled.wait(), delay)
                    except TimeoutError:
                        continue
                    raise TaskStopped(self.stop_reason) from e

    async def report(self, *events: EventArg) -> int:
        """Reports runtime events (dicts or RuntimeEvent messages), in order; returns the last sequence."""
        resp = await self._write(self.client.runtime.report_events, events=list(events), request_id=new_request_id())
        return resp.last_sequence

    async def note(self, text: str, attributes: Mapping[str, str] | None = None) -> int:
        """Reports a runtime note (progress, diagnostics)."""
        return await self.report({"note": {"text": text, "attributes": attributes or {}}})

    async def say(self, text: str, node: str = "") -> int:
        """Reports an assistant message."""
        return await self.report({"message": {"role": "MESSAGE_ROLE_ASSISTANT", "parts": [{"text": text}],
                                              "node": node}})

    async def history(self, after: int = 0, until: int = 0) -> AsyncIterator[task_pb2.TaskEvent]:
        """Task.history as an async generator: the logged events after after, up to until."""
        while True:
            resp = await self._write(self.client.runtime.read_task_history, after_sequence=after)
            if until <= 0:
                until = resp.last_sequence
            for ev in resp.events:
                if ev.sequence > until:
                    return
                yield ev
                after = ev.sequence
            if not resp.events or after >= until:
                return

    async def step(self, name: str, fn: Callable[[], Awaitable[_T]]) -> _T:
        """Task.step with a coroutine function: awaits fn() once per task and returns its
        result; a later lease gets the recorded result instead of running fn again."""
        if not name:
            raise ValueError("step needs a name")
        if self._steps is None:
            steps: dict[str, str] = {}
            async for ev in self.history():
                if ev.WhichOneof("payload") == "note" and ev.note.attributes.get(STEP_ATTR):
                    steps[ev.note.attributes[STEP_ATTR]] = ev.note.attributes.get(STEP_RESULT_ATTR, "null")
            self._steps = steps
        if name in self._steps:
            recorded: _T = json.loads(self._steps[name])
            return recorded
        value = await fn()
        encoded = json.dumps(value)
        await self.note(f"step {name} done", {STEP_ATTR: name, STEP_RESULT_ATTR: encoded})
        self._steps[name] = encoded
        return value

    async def tool_call(self, call_id: str, name: str, arguments_json: str = "{}", node: str = "") -> Gate:
        """Task.tool_call: asks the gate; waits for a decision (interactive) or suspends and
        raises Suspended (durable); a call reported under an earlier lease has gate.reported."""
        node = node or self.agent_name
        gate = await self._decide(call_id, name, arguments_json, node)
        gate.call_id, gate.name, gate.node = call_id, name, node
        if gate.reported or gate.reported_with_check:
            return gate
        call: dict[str, Any] = {"call_id": call_id, "tool_name": name, "node": node}
        if gate.allowed:
            await self.report({"tool_call": dict(call, arguments_json=gate.arguments_json)})
        else:
            await self.report({"tool_call": dict(call, arguments_json=arguments_json)},
                              {"tool_result": dict(call, result=gate.reason, is_error=True)})
        return gate

    async def model_call(self, call_id: str, node: str = "", model: str = "", trip: int = 0) -> None:
        """Task.model_call: asks CheckModelCall before a model call (only when the lease says
        check_model_calls); waits for an approval (interactive) or suspends and raises
        Suspended (durable); a rejection raises ModelCallRejected (the task has failed)."""
        if not self.lease.check_model_calls:
            return
        node = node or self.agent_name
        resp = await self._write(self.client.runtime.check_model_call, call_id=call_id, agent_name=node,
                                 trip_index=trip, model=model)
        if resp.outcome == GateOutcome.ALLOW:
            return
        if resp.outcome == GateOutcome.REJECT:
            gate = Task._gate_of(resp.decision, "")
        else:
            gate = await self._wait_or_use(call_id, resp.interrupt, "")
        if gate.allowed:
            return
        self.ended = "failed by the control plane: model call rejected"
        raise ModelCallRejected(f"model call {call_id} was rejected: {gate.reason}")

    async def _decide(self, call_id: str, name: str, arguments_json: str, node: str) -> Gate:
        it = self._resolved.pop(call_id, None) or self._pending.get(call_id)
        if it is not None:
            return await self._wait_or_use(call_id, it, arguments_json)
        resp = await self._write(self.client.runtime.check_tool_call, call_id=call_id, tool_name=name,
                                 arguments_json=arguments_json, agent_name=node, report_allowed_call=True)
        if resp.call_reported:
            return Gate(False, reported=True, result_reported=resp.result_reported, decision=resp.decision,
                        interrupt=resp.interrupt,
                        reason=f"call {call_id} was already run under an earlier lease of this task")
        if resp.outcome == GateOutcome.ALLOW:
            gate = Gate(True, arguments_json, decision=resp.decision)
            gate.reported_with_check = resp.reported_with_check
            return gate
        if resp.outcome == GateOutcome.REJECT:
            gate = Task._gate_of(resp.decision, arguments_json)
            gate.reason = gate.reason or resp.reason
            return gate
        return await self._wait_or_use(call_id, resp.interrupt, arguments_json)

    async def _wait_or_use(self, call_id: str, it: hitl_pb2.Interrupt, arguments_json: str) -> Gate:
        dec = it.decision if it.state == InterruptState.RESOLVED and it.HasField("decision") else None
        if dec is None:
            if self._delivery == "durable":
                await self.suspend()
                raise Suspended(f"interrupt {it.interrupt_id}, call {call_id}")
            dec = await self.await_decision(it.interrupt_id)
        gate = Task._gate_of(dec, arguments_json)
        gate.interrupt = it
        return gate

    async def await_decision(self, interrupt_id: str) -> hitl_pb2.Decision:
        """Waits for the decision on an interrupt (AwaitDecision), reconnecting on UNAVAILABLE.
        A stop of the task cancels the wait (asyncio.CancelledError in the handler); after
        the drain deadline the worker suspends the task, which then waits without a lease."""
        self._waiting = True
        try:
            while True:
                if self.canceled.is_set():
                    raise TaskStopped(self.stop_reason)
                try:
                    async for m in self.client.runtime.await_decision(lease=self.ref, interrupt_id=interrupt_id):
                        kind = m.WhichOneof("kind")
                        if kind == "decision":
                            return m.decision
                        if kind == "canceled":
                            self._stop(_Stop.CANCELED)
                            raise TaskStopped(_Stop.CANCELED)
                except AgentplaneError as e:
                    if self.canceled.is_set():
                        raise TaskStopped(self.stop_reason) from e
                    cause = _stop_cause(e)
                    if cause:
                        self._stop(cause)
                        raise TaskStopped(cause) from e
                    if e.code != grpc.StatusCode.UNAVAILABLE:
                        raise
                await asyncio.sleep(0.2)
        finally:
            self._waiting = False

    async def tool_result(self, call_id: str, name: str, result: Any, is_error: bool = False, node: str = "") -> int:
        """Reports a tool call's result (plain data)."""
        return await self.report({"tool_result": {"call_id": call_id, "tool_name": name, "result": result,
                                                  "is_error": is_error, "node": node}})

    async def record_verdict(self, node: str, result: Mapping[str, Any] | Message, resolved: Iterable[Any] = (),
                             raised: Iterable[Any] = (), ends_turn: bool = False,
                             call_id: str = "") -> runtime_service_pb2.RecordVerdictResponse:
        """Records an evaluator node's verdict; returns the RecordVerdictResponse."""
        return await self._write(self.client.runtime.record_verdict, node=node, result=result,
                                 resolved=list(resolved), raised=list(raised), ends_turn=ends_turn,
                                 call_id=call_id, request_id=new_request_id())

    async def publish_deltas(self, *deltas: Mapping[str, Any] | Message) -> int:
        """Hands message fragments to the task's live watchers; returns how many."""
        return (await self._write(self.client.runtime.publish_deltas, deltas=list(deltas))).watchers

    async def complete(self, output: Mapping[str, Any] | Message | None = None, text: str | None = None) -> None:
        """Completes the task with output (a TaskOutput dict) or a text answer."""
        if text is not None:
            output = {"message": {"role": "MESSAGE_ROLE_ASSISTANT", "parts": [{"text": text}]}}
        await self._write(self.client.runtime.complete_task, end="completed", output=output or {},
                          request_id=new_request_id())

    async def fail(self, reason: str, message: str, retry: bool = False, force: bool = False) -> None:
        """Fails the task; retry hands it back to the queue (counting an attempt)."""
        await self._write(self.client.runtime.fail_task, end="handed back" if retry else "failed", force=force,
                          reason=reason, message=message, retry=retry, request_id=new_request_id())

    async def suspend(self) -> None:
        """Gives the lease up while an interrupt is pending (durable delivery)."""
        await self._write(self.client.runtime.suspend_task, end="suspended", request_id=new_request_id())

    async def pause(self, message: str = "", node: str = "") -> hitl_pb2.Interrupt:
        """Ends a chat turn (INPUT_REQUIRED until ContinueTask); returns the interrupt."""
        msg = {"role": "MESSAGE_ROLE_ASSISTANT", "parts": [{"text": message}]} if message else None
        resp = await self._write(self.client.runtime.pause_task, end="paused", node=node, message=msg,
                                 request_id=new_request_id())
        return resp.interrupt

    async def wait_for_tool_outputs(self, node: str, *gates: Gate) -> list[hitl_pb2.Interrupt]:
        """Ends a turn whose allowed calls are function tools the client runs; returns the interrupts."""
        calls = [{"call_id": g.call_id, "tool_name": g.name, "arguments_json": g.arguments_json, "node": g.node,
                  "trip_index": g.trip} for g in gates]
        resp = await self._write(self.client.runtime.pause_task, end="paused", node=node, tool_output_calls=calls,
                                 request_id=new_request_id())
        return list(resp.tool_output_interrupts)


AsyncHandler = Callable[[AsyncTask], Coroutine[Any, Any, None]]


class AsyncWorker:
    """Leases tasks for runtime_id and awaits handler(task) for each, capacity at a time, on
    the running event loop. The arguments are Worker's (poll_wait 20 s, drain_timeout 20 s,
    write_timeout 10 s by default); client is an AsyncClient."""

    def __init__(self, client: AsyncClient, handler: AsyncHandler, runtime_id: str, capacity: int = 1,
                 queues: Iterable[str] = (), delivery: Delivery = "interactive",
                 poll_wait: float = DEFAULT_POLL_WAIT, drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
                 write_timeout: float = DEFAULT_WRITE_TIMEOUT) -> None:
        check_options(runtime_id, capacity, delivery, poll_wait, drain_timeout, write_timeout)
        self.client = client
        self.handler = handler
        self.runtime_id = runtime_id
        self.capacity = capacity
        self.queues = list(queues)
        self.delivery: Delivery = delivery
        self.poll_wait = poll_wait
        self.drain_timeout = drain_timeout
        self.write_timeout = write_timeout
        self._stopping = asyncio.Event()
        self._poll: asyncio.Task[runtime_service_pb2.LeaseTasksResponse] | None = None
        self._running: dict[asyncio.Task[None], AsyncTask] = {}
        self._freed = asyncio.Event()  # a task ended: a slot may be free
        self._runner: asyncio.Task[None] | None = None

    async def __aenter__(self) -> "AsyncWorker":
        self._runner = asyncio.create_task(self.run(), name=f"agentplane worker {self.runtime_id}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        if self._runner is not None:
            await self._runner

    async def run(self) -> None:
        """Leases and runs tasks until stop(); then waits for the running tasks. A permanent
        LeaseTasks error (PERMISSION_DENIED, say) is raised once they have ended. Cancelling
        the task that awaits run() stops every handler at once (stop_reason "stopping",
        handed back) and re-raises the CancelledError."""
        failures = 0
        try:
            while not self._stopping.is_set():
                free = self.capacity - len(self._running)
                if free <= 0:
                    self._freed.clear()
                    await _first(self._freed.wait(), self._stopping.wait())
                    continue
                began = time.monotonic()
                self._poll = asyncio.ensure_future(self.client.runtime.lease_tasks(
                    runtime_id=self.runtime_id, max_tasks=free, wait=self.poll_wait, queues=self.queues,
                    timeout=self.poll_wait + POLL_GRACE))
                try:
                    await asyncio.wait({self._poll})
                finally:
                    poll, self._poll = self._poll, None
                    poll.cancel()  # when run() itself was cancelled: no poll outlives it
                if poll.cancelled():
                    continue  # stop() cut the poll short
                err = poll.exception()
                if isinstance(err, AgentplaneError) and (err.code in _LOST_ON_THE_WAY or err.retry_delay is not None):
                    failures += 1
                    await _first(asyncio.sleep(err.retry_delay or _backoff(failures)), self._stopping.wait())
                    continue
                leases = poll.result().leases  # raises a permanent error
                failures = 0
                for lease in leases:
                    self._start(AsyncTask(self, lease))
                if not leases and time.monotonic() - began < self.poll_wait / 2:
                    await _first(asyncio.sleep(0.1), self._stopping.wait())
            if self._running:
                await asyncio.wait(set(self._running))
        except asyncio.CancelledError:
            self._stopping.set()
            for t in list(self._running.values()):
                t._stop(_Stop.STOPPING)
            if self._running:
                await asyncio.shield(asyncio.wait(set(self._running)))
            raise
        except BaseException:
            # A permanent LeaseTasks error: lease no more, let the running tasks end (as Worker.run).
            self._stopping.set()
            if self._running:
                await asyncio.wait(set(self._running))
            raise

    def _start(self, task: AsyncTask) -> None:
        t = asyncio.create_task(self._run_task(task), name=f"agentplane task {task.task_id}")
        self._running[t] = task

        def done(_: "asyncio.Task[None]") -> None:
            self._running.pop(t, None)
            self._freed.set()

        t.add_done_callback(done)

    async def stop(self, timeout: float | None = None) -> bool:
        """Stops leasing (cancelling the long poll) and waits for the running tasks to end
        on their own. When timeout (seconds; None: drain_timeout) passes first, it stops
        them (their handlers are cancelled, stop_reason "stopping") and hands them back: a
        task waiting for a decision is suspended, any other returned to the queue. Returns
        whether they ended within timeout."""
        self._stopping.set()
        if self._poll is not None:
            self._poll.cancel()
        if timeout is None:
            timeout = self.drain_timeout
        me = asyncio.current_task()
        running = {t for t in self._running if t is not me}
        if not running:
            return True
        _, left = await asyncio.wait(running, timeout=timeout)
        for t in left:
            task = self._running.get(t)
            if task is not None:
                task._stop(_Stop.STOPPING)
        if left:
            await asyncio.wait(left)  # the hand-backs (bounded by write_timeout)
        return not left

    async def run_until_signal(self) -> None:
        """Runs the worker until SIGTERM or SIGINT: the first signal stops leasing and drains
        for drain_timeout, a second hands the running tasks back at once. Returns once every
        task has ended; raises what run() raised."""
        loop = asyncio.get_running_loop()
        count = 0
        got = asyncio.Event()

        def on_signal() -> None:
            nonlocal count
            count += 1
            got.set()

        sigs = (signal.SIGTERM, signal.SIGINT)
        for s in sigs:
            loop.add_signal_handler(s, on_signal)
        runner = asyncio.create_task(self.run())
        try:
            await _first(runner, got.wait())
            if not runner.done():
                got.clear()
                drain = asyncio.create_task(self.stop())
                await _first(drain, got.wait())
                if not drain.done():
                    await self.stop(timeout=0)
                    await drain
            await runner
        finally:
            for s in sigs:
                loop.remove_signal_handler(s)

    async def _run_task(self, task: AsyncTask) -> None:
        if not await self._heartbeat(task):
            return
        beats = asyncio.create_task(self._heartbeats(task))
        handler = task._handler = asyncio.create_task(self.handler(task))
        if task.canceled.is_set():  # stopped before the handler existed to be cancelled
            handler.cancel()
        error: BaseException | None = None
        try:
            await asyncio.wait({handler})
        finally:
            beats.cancel()
            if not handler.done():  # run() was cancelled: stop the handler as well
                task._stop(_Stop.STOPPING)
                await asyncio.wait({handler})
        if not handler.cancelled():
            error = handler.exception()
            if isinstance(error, (TaskStopped, Suspended)):
                error = None
        elif not task.canceled.is_set():
            # The handler cancelled itself (or something else did): treat it as a failure.
            error = asyncio.CancelledError("the handler was cancelled")
        await self._finish(task, error)

    @staticmethod
    async def _finish(task: AsyncTask, error: BaseException | None) -> None:
        """Applies the handler contract once the handler returned (Worker._finish)."""
        if task.ended:
            return
        try:
            if task.stop_reason == _Stop.STOPPING and task._wait_stopped:
                await task._write(task.client.runtime.suspend_task, end="suspended", force=True,
                                  request_id=new_request_id())
            elif task.stop_reason == _Stop.STOPPING:
                await task.fail("runtime.stopping", "the runtime stopped before the task ended", retry=True,
                                force=True)
            elif task.canceled.is_set() or error is None:
                return
            elif isinstance(error, Failure):
                await task.fail(error.reason or "runtime.error", error.message, retry=error.retry)
            else:
                await task.fail("runtime.error", f"{type(error).__name__}: {error}")
        except (AgentplaneError, TaskStopped):
            pass  # the lease expires and the task is queued again

    async def _heartbeat(self, task: AsyncTask) -> bool:
        try:
            resp = await self.client.runtime.heartbeat(lease=task.ref, timeout=max(1.0, task.deadline - time.time()))
        except AgentplaneError as e:
            cause = _stop_cause(e)
            if cause:
                task._stop(cause)
                return False
            return True  # transient: the next beat tries again
        task.deadline = resp.deadline.ToNanoseconds() / 1e9
        if resp.canceled:
            task._stop(_Stop.CANCELED)
            return False
        return True

    async def _heartbeats(self, task: AsyncTask) -> None:
        while not task.canceled.is_set() and not task.ended:
            await asyncio.sleep(max(0.01, (task.deadline - time.time()) / 3))
            if task.ended:
                return  # the lease was given up; a heartbeat would only be refused
            await self._heartbeat(task)
            if time.time() > task.deadline and not task.ended:
                task._stop(_Stop.LEASE_LOST)  # no heartbeat succeeded before the deadline


async def _first(*aws: Awaitable[Any]) -> None:
    """Waits until the first of aws is done, and cancels the others (a task given here
    that is not done is cancelled too: pass only what may be)."""
    tasks = [a if isinstance(a, asyncio.Future) else asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            if not t.done() and t not in aws:
                t.cancel()
