"""Worker: a runtime's lease loop, mirroring Go's client/worker.

A Worker long-polls RuntimeService.LeaseTasks for up to `capacity` tasks at a time
and runs each leased task in its own thread, calling handler(task). It heartbeats
once before the handler runs (acknowledging the lease) and then in the background;
task.canceled is set when a heartbeat says the task was canceled, when the lease is
lost (a write or heartbeat refused as LEASE_LOST, or no heartbeat succeeded before
the lease deadline), or when the worker stops and its drain time ran out
(task.stop_reason says which: "canceled", "lease_lost" or "stopping", the names Go's
worker.StopReason and TypeScript's TaskStopped.kind use, agentplane.StopReason's values);
the Task's writes
then raise TaskStopped.

The handler ends its task with task.complete, task.fail, task.pause,
task.wait_for_tool_outputs or task.suspend. An exception from the handler fails the
task (reason "runtime.error", or the reason and retry of a Failure); after a cancel or
a lost lease nothing is written; a task stopped by Worker.stop's deadline is handed
back to the queue (FailTask retry). task.tool_call asks the gate (CheckToolCall) before
a tool runs: on an interrupt it waits for the decision on AwaitDecision while
heartbeats keep the lease ("interactive"), or gives the lease up with SuspendTask and
raises Suspended ("durable"); the next lease carries the decision, which tool_call
then returns for the same call id without asking again. A call the gate says was
already reported under an earlier lease (the runtime crashed after running it) comes
back with gate.reported set: do not run it again; task.history() reads the log to
rebuild the state. task.step(name, fn) runs fn once per task: a lease that resumes the
task (after a durable wait, a hand-back, a crash after the record) gets the recorded
result instead of running fn again.

The task's writes carry request ids and are repeated after UNAVAILABLE,
DEADLINE_EXCEEDED or an error the server marks retryable (STORE_UNAVAILABLE while its
database restarts) while the lease may still be renewed; a call still failing at the
lease deadline stops the task ("lease_lost"): the lease expires and the task is queued
again, so an outage does not fail it.

Worker.stop() drains for at most drain_timeout (default 20 s, under the 30 s systemd
and Kubernetes leave between SIGTERM and SIGKILL): then the tasks still running are
handed back, a task waiting for a decision by suspending it (it resumes on whichever
runtime is up when the decision comes, no attempt counted), any other by FailTask
retry. Worker.run_until_signal() does that on SIGTERM or SIGINT.
"""

# Worker and Task are one unit: the worker reads and sets the task's private state.
# pyright: reportPrivateUsage=false

import json
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, TypeVar, Union

import grpc
from google.protobuf.message import Message

from agentplane import _retry
from agentplane._api import Reason
from agentplane._api import StopReason as _Stop
from agentplane._calls import Pending, Stream, Unary
from agentplane._ids import new_request_id
from agentplane.client import Client
from agentplane.enums import DecisionType, GateOutcome, InterruptKind, InterruptState
from agentplane.errors import AgentplaneError
from agentplane.v1 import hitl_pb2, runtime_service_pb2, task_pb2

__all__ = [
    "DEFAULT_DRAIN_TIMEOUT", "DEFAULT_POLL_WAIT", "DEFAULT_WRITE_TIMEOUT", "Delivery", "Failure", "Gate", "Handler",
    "STEP_ATTR", "STEP_RESULT_ATTR", "ModelCallRejected", "StopReason", "Suspended", "Task", "TaskStopped", "Worker",
]

APPROVE = DecisionType.APPROVE
EDIT = DecisionType.EDIT

Delivery = Literal["interactive", "durable"]
# Why a task stopped being this runtime's: "" while it still is.
# The names of why a task stopped, the same in every SDK (agentplane.StopReason, generated
# by tools/sdkgen, has them as constants; tests/test_retry.py checks that they agree).
StopReason = Literal["", "canceled", "lease_lost", "stopping"]
# A runtime event to report: a RuntimeEvent, or its fields as a dict.
EventArg = Union[runtime_service_pb2.RuntimeEvent, Mapping[str, Any]]
_T = TypeVar("_T")
_R = TypeVar("_R", bound=Message)


class TaskStopped(Exception):
    """The task was canceled, its lease lost, or the worker stopped: it is no longer this
    runtime's to write."""


class Failure(Exception):
    """Raised by a handler to choose how its task fails (reason, retry)."""

    def __init__(self, reason: str, message: str, retry: bool = False) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry = retry


DEFAULT_DRAIN_TIMEOUT = 20.0
# How long one LeaseTasks call waits for work, as in Go and TypeScript (the server caps it at 30 s).
DEFAULT_POLL_WAIT = 20.0
# Added to the long poll's wait to make its deadline: a server that holds the poll for the
# whole wait is not cut off, a dead connection is (Go's pollGrace).
POLL_GRACE = 10.0
# The deadline of each attempt of a write or read the worker makes (a retried attempt
# gets a new one, until the lease deadline), as Go's WriteTimeout.
DEFAULT_WRITE_TIMEOUT = 10.0
# The runtime note attributes that record a step (Task.step); the Go and TypeScript SDKs
# use the same.
STEP_ATTR = "agentplane.step"
STEP_RESULT_ATTR = "agentplane.step.result"
_LOST_ON_THE_WAY = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def _retryable(err: AgentplaneError) -> bool:
    """Whether a failed call may succeed if made again: lost on the way, or the server
    says to retry (a RetryInfo: STORE_UNAVAILABLE, SERVER_UNAVAILABLE, ...)."""
    return err.code in _LOST_ON_THE_WAY or err.retry_delay is not None


def _backoff(failures: int) -> float:
    """The pause before retry number failures (from 1): the retry policy of every SDK
    (agentplane._retry.delay: 0.1 s doubling up to 2 s, jittered into [d/2, d])."""
    return _retry.delay(failures)


def _stop_cause(err: AgentplaneError) -> StopReason:
    """The stop reason a refused call means, or "" when the task is still ours."""
    if err.code == grpc.StatusCode.FAILED_PRECONDITION:
        if err.reason == Reason.LEASE_LOST:
            return _Stop.LEASE_LOST
        if err.reason == Reason.TASK_TERMINAL:
            return _Stop.CANCELED
    return ""


class Suspended(Exception):
    """The task gave its lease up to wait durably for a decision."""


class ModelCallRejected(Exception):
    """Task.model_call: a person (or the deadline) rejected the model call, and the control
    plane failed the task (reason budget.model_call_rejected). Return from the handler."""


class Gate:
    """The gate's answer for one tool call."""

    def __init__(self, allowed: bool, arguments_json: str = "", reason: str = "",
                 decision: hitl_pb2.Decision | None = None, interrupt: hitl_pb2.Interrupt | None = None,
                 reported: bool = False, result_reported: bool = False) -> None:
        self.call_id = self.name = self.node = ""
        self.trip = 0
        self.allowed = allowed
        self.arguments_json = arguments_json
        self.reason = reason
        self.decision = decision
        self.interrupt = interrupt
        self.reported = reported
        self.result_reported = result_reported
        # set when the control plane logged the allowed call with its answer
        self.reported_with_check = False


class Task:
    """One leased task, handed to the handler."""

    def __init__(self, worker: "Worker", lease: runtime_service_pb2.Lease) -> None:
        self.client = worker.client
        self.lease = lease
        self.task_id = lease.task.task_id
        self.ref: dict[str, Any] = {"task_id": self.task_id, "lease_id": lease.lease_id, "epoch": lease.epoch}
        self.canceled = threading.Event()
        self.stop_reason: StopReason = ""
        self.ended = ""
        self.deadline = lease.deadline.ToNanoseconds() / 1e9 if lease.HasField("deadline") else time.time() + 30
        self._delivery = worker.delivery
        self._write_timeout = worker.write_timeout
        # The node a tool call belongs to by default: the agent of an AgentSpec task.
        self.agent_name = lease.spec.agent.name if lease.spec.WhichOneof("spec") == "agent" else ""
        self._streams: set[Stream[runtime_service_pb2.AwaitDecisionResponse]] = set()  # cancelled when the task stops
        self._streams_lock = threading.Lock()
        self._resolved = _by_call_id(lease.resolved_interrupts)
        self._pending = _by_call_id(lease.pending_interrupts)
        self._wait_stopped = False  # the worker's stop ended an interactive wait
        self._steps: dict[str, str] | None = None  # recorded step results by name, read on the first step()

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
        if not self.canceled.is_set():
            self.stop_reason = why
            self.canceled.set()
        with self._streams_lock:
            for st in self._streams:
                st.cancel()

    def _write(self, call: Unary[Any, _R], end: str = "", force: bool = False, **fields: Any) -> _R:
        """Makes one fenced call under the lease. A call that fails transiently (lost on the
        way, or STORE_UNAVAILABLE while the database restarts) is made again with the same
        fields, request id included, so the server answers a repeat from the first, while
        the lease may still be renewed (until its deadline, which heartbeats move while
        they succeed); LEASE_LOST and TASK_TERMINAL stop the task, and so does a call still
        failing at the deadline (the lease expires and the task is queued again)."""
        if self.ended:
            raise RuntimeError(f"the task was already ended by this runtime ({self.ended})")
        failures = 0
        while True:
            if self.canceled.is_set() and not force:
                raise TaskStopped(self.stop_reason)
            try:
                resp = call(lease=self.ref, timeout=self._write_timeout, **fields)
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
                    time.sleep(delay)  # a hand-back after the stop: canceled is already set
                elif self.canceled.wait(delay):
                    raise TaskStopped(self.stop_reason) from e

    def report(self, *events: EventArg) -> int:
        """Reports runtime events (dicts or RuntimeEvent messages), in order; returns the last sequence."""
        return self._write(self.client.runtime.report_events, events=list(events),
                           request_id=new_request_id()).last_sequence

    def note(self, text: str, attributes: Mapping[str, str] | None = None) -> int:
        """Reports a runtime note (progress, diagnostics)."""
        return self.report({"note": {"text": text, "attributes": attributes or {}}})

    def history(self, after: int = 0, until: int = 0) -> Iterator[task_pb2.TaskEvent]:
        """Yields the task's logged events after sequence after, oldest first, up to until
        (0: the newest when the read starts), paging through ReadTaskHistory under the lease
        (runtimes may not call WatchTask). A resumed handler reads up to
        task.lease.history_cursor to rebuild its state."""
        while True:
            resp = self._write(self.client.runtime.read_task_history, after_sequence=after)
            if until <= 0:
                until = resp.last_sequence
            for ev in resp.events:
                if ev.sequence > until:
                    return
                yield ev
                after = ev.sequence
            if not resp.events or after >= until:
                return

    def step(self, name: str, fn: Callable[[], _T]) -> _T:
        """Runs fn() once per task and returns its result. When the task's history already
        records step name (an earlier lease ran it, before a durable wait, a hand-back on
        stop, or a crash after the record), returns the recorded result without calling
        fn. Use it for what must not happen twice before the handler may lose its lease:
        a message to the user, a call to another system. The record is a runtime note
        (STEP_ATTR, STEP_RESULT_ATTR) reported after fn returned; the result must survive
        json and should be small. A runtime that dies between fn and the record runs fn
        again; a durable wait, a pause and a stop always come after it. name must be unique
        in the task."""
        if not name:
            raise ValueError("step needs a name")
        if self._steps is None:
            steps: dict[str, str] = {}
            for ev in self.history():
                if ev.WhichOneof("payload") == "note" and ev.note.attributes.get(STEP_ATTR):
                    steps[ev.note.attributes[STEP_ATTR]] = ev.note.attributes.get(STEP_RESULT_ATTR, "null")
            self._steps = steps
        if name in self._steps:
            recorded: _T = json.loads(self._steps[name])
            return recorded
        value = fn()
        encoded = json.dumps(value)
        self.note(f"step {name} done", {STEP_ATTR: name, STEP_RESULT_ATTR: encoded})
        self._steps[name] = encoded
        return value

    def say(self, text: str, node: str = "") -> int:
        """Reports an assistant message."""
        return self.report({"message": {"role": "MESSAGE_ROLE_ASSISTANT", "parts": [{"text": text}], "node": node}})

    def tool_call(self, call_id: str, name: str, arguments_json: str = "{}", node: str = "") -> Gate:
        """Asks the gate about a tool call; returns a Gate (raises Suspended in durable mode).

        node is the agent making the call; empty means the task's agent (AgentSpec tasks).
        """
        node = node or self.agent_name
        gate = self._decide(call_id, name, arguments_json, node)
        gate.call_id, gate.name, gate.node = call_id, name, node
        if gate.reported or gate.reported_with_check:
            return gate
        call: dict[str, Any] = {"call_id": call_id, "tool_name": name, "node": node}
        if gate.allowed:
            self.report({"tool_call": dict(call, arguments_json=gate.arguments_json)})
        else:
            self.report({"tool_call": dict(call, arguments_json=arguments_json)},
                        {"tool_result": dict(call, result=gate.reason, is_error=True)})
        return gate

    def model_call(self, call_id: str, node: str = "", model: str = "", trip: int = 0) -> None:
        """Asks, before a model call, whether it may run: a task counting against a budget
        whose on_limit is approve (docs/budgets.md) needs a person's approval for each model
        call once that budget is spent. Returns when the call may run, without a round trip
        when the lease does not say check_model_calls. A held call waits for its decision
        (interactive) or gives the lease up and raises Suspended (durable), as tool_call
        does; a rejection raises ModelCallRejected (the task has failed). call_id must be
        unique in the task and the same when a later lease replays the turn."""
        if not self.lease.check_model_calls:
            return
        node = node or self.agent_name
        resp = self._write(self.client.runtime.check_model_call, call_id=call_id, agent_name=node,
                           trip_index=trip, model=model)
        if resp.outcome == GateOutcome.ALLOW:
            return
        if resp.outcome == GateOutcome.REJECT:
            gate = self._gate_of(resp.decision, "")
        else:
            gate = self._wait_or_use(call_id, resp.interrupt, "")
        if gate.allowed:
            return
        self.ended = "failed by the control plane: model call rejected"
        raise ModelCallRejected(f"model call {call_id} was rejected: {gate.reason}")

    def _decide(self, call_id: str, name: str, arguments_json: str, node: str) -> Gate:
        it = self._resolved.pop(call_id, None) or self._pending.get(call_id)
        if it is not None:
            return self._wait_or_use(call_id, it, arguments_json)
        else:
            resp = self._write(self.client.runtime.check_tool_call, call_id=call_id, tool_name=name,
                                       arguments_json=arguments_json, agent_name=node,
                                       # an allowed call is reported by the check itself
                                       report_allowed_call=True)
            if resp.call_reported:
                return Gate(False, reported=True, result_reported=resp.result_reported, decision=resp.decision,
                            interrupt=resp.interrupt,
                            reason=f"call {call_id} was already run under an earlier lease of this task")
            if resp.outcome == GateOutcome.ALLOW:
                gate = Gate(True, arguments_json, decision=resp.decision)
                gate.reported_with_check = resp.reported_with_check
                return gate
            if resp.outcome == GateOutcome.REJECT:
                gate = self._gate_of(resp.decision, arguments_json)
                gate.reason = gate.reason or resp.reason
                return gate
            return self._wait_or_use(call_id, resp.interrupt, arguments_json)

    def _wait_or_use(self, call_id: str, it: hitl_pb2.Interrupt, arguments_json: str) -> Gate:
        dec = it.decision if it.state == InterruptState.RESOLVED and it.HasField("decision") else None
        if dec is None:
            if self._delivery == "durable":
                self.suspend()
                raise Suspended(f"interrupt {it.interrupt_id}, call {call_id}")
            dec = self.await_decision(it.interrupt_id)
        gate = self._gate_of(dec, arguments_json)
        gate.interrupt = it
        return gate

    @staticmethod
    def _gate_of(dec: hitl_pb2.Decision, arguments_json: str) -> Gate:
        if dec.type == APPROVE:
            return Gate(True, arguments_json, decision=dec)
        if dec.type == EDIT:
            return Gate(True, dec.arguments_json, decision=dec)
        return Gate(False, reason=dec.model_reason or dec.reason, decision=dec)

    def await_decision(self, interrupt_id: str) -> hitl_pb2.Decision:
        """Waits for the decision on an interrupt (AwaitDecision), reconnecting on UNAVAILABLE.
        A stop of the task (cancel, lost lease, the worker's drain deadline) ends the wait
        with TaskStopped; after the drain deadline the worker suspends the task, which then
        waits for the decision without a lease."""
        try:
            return self._await_decision(interrupt_id)
        except BaseException:
            if self.stop_reason == _Stop.STOPPING:
                self._wait_stopped = True
            raise

    def _await_decision(self, interrupt_id: str) -> hitl_pb2.Decision:
        while True:
            stream = self.client.runtime.await_decision(lease=self.ref, interrupt_id=interrupt_id)
            with self._streams_lock:
                self._streams.add(stream)
            try:
                if self.canceled.is_set():
                    raise TaskStopped(self.stop_reason)
                for m in stream:
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
            finally:
                with self._streams_lock:
                    self._streams.discard(stream)
                stream.cancel()
            self.canceled.wait(0.2)

    def tool_result(self, call_id: str, name: str, result: Any, is_error: bool = False, node: str = "") -> int:
        """Reports a tool call's result (plain data)."""
        return self.report({"tool_result": {"call_id": call_id, "tool_name": name, "result": result,
                                            "is_error": is_error, "node": node}})

    def record_verdict(self, node: str, result: Mapping[str, Any] | Message, resolved: Iterable[Any] = (),
                       raised: Iterable[Any] = (), ends_turn: bool = False,
                       call_id: str = "") -> runtime_service_pb2.RecordVerdictResponse:
        """Records an evaluator node's verdict (result: a VerdictResult dict, {"verdict": "pass"});
        returns the RecordVerdictResponse (the verdict as recorded, the open obligations)."""
        return self._write(self.client.runtime.record_verdict, node=node, result=result, resolved=list(resolved),
                           raised=list(raised), ends_turn=ends_turn, call_id=call_id, request_id=new_request_id())

    def publish_deltas(self, *deltas: Mapping[str, Any] | Message) -> int:
        """Hands message fragments (MessageDelta dicts) to the task's live watchers; returns how many."""
        return self._write(self.client.runtime.publish_deltas, deltas=list(deltas)).watchers

    def complete(self, output: Mapping[str, Any] | Message | None = None, text: str | None = None) -> None:
        """Completes the task with output (a TaskOutput dict) or a text answer."""
        if text is not None:
            output = {"message": {"role": "MESSAGE_ROLE_ASSISTANT", "parts": [{"text": text}]}}
        self._write(self.client.runtime.complete_task, end="completed", output=output or {},
                    request_id=new_request_id())

    def fail(self, reason: str, message: str, retry: bool = False, force: bool = False) -> None:
        """Fails the task; retry hands it back to the queue (counting an attempt)."""
        self._write(self.client.runtime.fail_task, end="handed back" if retry else "failed", force=force,
                    reason=reason, message=message, retry=retry, request_id=new_request_id())

    def suspend(self) -> None:
        """Gives the lease up while an interrupt is pending (durable delivery)."""
        self._write(self.client.runtime.suspend_task, end="suspended", request_id=new_request_id())

    def pause(self, message: str = "", node: str = "") -> hitl_pb2.Interrupt:
        """Ends a chat turn: the task waits in INPUT_REQUIRED for ContinueTask; the next
        lease carries the user's messages in continue_messages. Returns the interrupt."""
        msg = {"role": "MESSAGE_ROLE_ASSISTANT", "parts": [{"text": message}]} if message else None
        return self._write(self.client.runtime.pause_task, end="paused", node=node, message=msg,
                           request_id=new_request_id()).interrupt

    def wait_for_tool_outputs(self, node: str, *gates: Gate) -> list[hitl_pb2.Interrupt]:
        """Ends a turn whose allowed calls (gates from tool_call) are function tools the
        client runs: the task waits in INPUT_REQUIRED on one TOOL_OUTPUT_REQUIRED interrupt
        per call until ContinueTask supplies their outputs; the next lease carries them in
        continue_tool_results. Returns the interrupts."""
        calls = [{"call_id": g.call_id, "tool_name": g.name, "arguments_json": g.arguments_json, "node": g.node,
                  "trip_index": g.trip} for g in gates]
        return list(self._write(self.client.runtime.pause_task, end="paused", node=node, tool_output_calls=calls,
                                request_id=new_request_id()).tool_output_interrupts)


def _by_call_id(interrupts: Iterable[hitl_pb2.Interrupt]) -> dict[str, hitl_pb2.Interrupt]:
    return {it.call_id: it for it in interrupts
            if it.call_id and it.kind == InterruptKind.TOOL_APPROVAL}


Handler = Callable[[Task], None]


class Worker:
    """Leases tasks for runtime_id and runs handler(task) for each, capacity at a time, in
    a thread per task (agentplane.async_worker.AsyncWorker is the same on asyncio).

    poll_wait: how long one LeaseTasks call waits for work (default 20 s, as in Go and
    TypeScript; stop() cuts it short). Every call has a deadline: the long poll poll_wait
    plus 10 s, a heartbeat the time left on the lease (at least 1 s), each attempt of a
    task's write or read write_timeout (10 s; a retried attempt gets a new one, until the
    lease deadline). drain_timeout: stop()'s default (20 s).
    """

    def __init__(self, client: Client, handler: Handler, runtime_id: str, capacity: int = 1,
                 queues: Iterable[str] = (), delivery: Delivery = "interactive",
                 poll_wait: float = DEFAULT_POLL_WAIT, drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
                 write_timeout: float = DEFAULT_WRITE_TIMEOUT) -> None:
        check_options(runtime_id, capacity, delivery, poll_wait, drain_timeout, write_timeout)
        self.client = client
        self.handler = handler
        self.runtime_id = runtime_id
        self.capacity = capacity
        self.queues = list(queues)
        self.delivery = delivery
        self.poll_wait = poll_wait
        self.drain_timeout = drain_timeout
        self.write_timeout = write_timeout
        self._stopping = threading.Event()
        self._slots = threading.Semaphore(capacity)
        self._lock = threading.Lock()
        self._running: dict[threading.Thread, Task] = {}
        self._poll: Pending[runtime_service_pb2.LeaseTasksResponse] | None = None  # the long poll under way

    def stop(self, timeout: float | None = None, wait: bool = True) -> bool:
        """Stops leasing and waits for the running tasks to end on their own. When timeout
        (seconds; None: drain_timeout) passes first, it stops them (task.canceled set,
        stop_reason "stopping": the handler should return) and they are handed back unless
        their handler ended them: a task waiting for a decision is suspended, any other is
        returned to the queue (FailTask retry). Returns whether they ended within timeout;
        with wait=False it only asks, and run() returns once they have ended."""
        self._stopping.set()
        with self._lock:
            poll = self._poll
        if poll is not None:
            poll.cancel()  # stop leasing now, not when the long poll ends
        if not wait:
            return False
        if timeout is None:
            timeout = self.drain_timeout
        end = time.monotonic() + timeout
        me = threading.current_thread()
        for t in self._threads():
            if t is not me:
                t.join(max(0.0, end - time.monotonic()))
        left = [t for t in self._threads() if t is not me]
        with self._lock:
            for t in left:
                self._running[t]._stop(_Stop.STOPPING)
        return not left

    def run_until_signal(self) -> None:
        """Runs the worker until SIGTERM or SIGINT, the way a process manager stops it: the
        first signal stops leasing and drains for drain_timeout (stop()), a second hands
        the running tasks back at once. Returns once every task has ended, so the process
        can exit 0; raises what run() raised (a permanent LeaseTasks error). Call it from
        the main thread (Python delivers signals there)."""
        signals = threading.Event()
        count = [0]

        def on_signal(*_: object) -> None:
            count[0] += 1
            signals.set()

        failed: list[BaseException] = []

        def run() -> None:
            try:
                self.run()
            except BaseException as e:  # re-raised in the caller's thread below
                failed.append(e)

        old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        runner = threading.Thread(target=run, daemon=True)
        runner.start()
        try:
            while runner.is_alive() and not signals.wait(0.2):
                pass
            if runner.is_alive():
                drainer = threading.Thread(target=self.stop, daemon=True)
                drainer.start()
                while drainer.is_alive() and count[0] < 2:
                    drainer.join(0.2)
                if count[0] >= 2:
                    self.stop(timeout=0)
            runner.join()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
        if failed:
            raise failed[0]

    def _threads(self) -> list[threading.Thread]:
        with self._lock:
            return list(self._running)

    def run(self) -> None:
        """Leases and runs tasks until stop(); then waits for the running tasks."""
        failures = 0
        try:
            while not self._stopping.is_set():
                if not self._slots.acquire(timeout=0.5):
                    continue  # every slot busy: check for stop, then wait again
                free = 1
                while free < self.capacity and self._slots.acquire(blocking=False):
                    free += 1
                leases: list[runtime_service_pb2.Lease] = []
                began = time.monotonic()
                try:
                    leases = self._lease(free)
                    failures = 0
                except AgentplaneError as e:
                    if self._stopping.is_set():
                        pass  # stop() cancelled the poll
                    elif e.code not in _LOST_ON_THE_WAY and e.retry_delay is None:
                        raise
                    else:
                        failures += 1
                        self._stopping.wait(e.retry_delay or _backoff(failures))
                else:
                    if not leases and time.monotonic() - began < self.poll_wait / 2:
                        # an empty answer well before the wait: a server that does not hold polls
                        self._stopping.wait(0.1)
                for _ in range(free - len(leases)):
                    self._slots.release()
                for lease in leases:
                    task = Task(self, lease)
                    t = threading.Thread(target=self._run_task, args=(task,), daemon=True)
                    with self._lock:
                        self._running[t] = task
                    t.start()
        finally:
            for t in self._threads():
                t.join()

    def _lease(self, free: int) -> list[runtime_service_pb2.Lease]:
        """One long poll for up to free tasks, cancelled by stop()."""
        with self._lock:
            if self._stopping.is_set():
                return []
            poll = self._poll = self.client.runtime.lease_tasks.future(
                runtime_id=self.runtime_id, max_tasks=free, wait=self.poll_wait, queues=self.queues,
                timeout=self.poll_wait + POLL_GRACE)
        try:
            return list(poll.result().leases)
        finally:
            with self._lock:
                self._poll = None

    def _run_task(self, task: Task) -> None:
        done = threading.Event()
        try:
            if not self._heartbeat(task):
                return
            hb = threading.Thread(target=self._heartbeats, args=(task, done), daemon=True)
            hb.start()
            error: Exception | None = None
            try:
                self.handler(task)
            except (TaskStopped, Suspended):
                pass
            except Exception as e:  # the handler's failure fails the task
                error = e
            done.set()
            hb.join()
            self._finish(task, error)
        finally:
            done.set()
            with self._lock:
                self._running.pop(threading.current_thread(), None)
            self._slots.release()

    @staticmethod
    def _finish(task: Task, error: Exception | None) -> None:
        """Applies the handler contract once the handler returned (Go's worker.finish)."""
        if task.ended:
            return
        try:
            if task.stop_reason == _Stop.STOPPING and task._wait_stopped:
                # Suspended, not failed: it waits for its decision without a lease and
                # without counting an attempt.
                task._write(task.client.runtime.suspend_task, end="suspended", force=True, request_id=new_request_id())
            elif task.stop_reason == _Stop.STOPPING:
                task.fail("runtime.stopping", "the runtime stopped before the task ended", retry=True, force=True)
            elif task.canceled.is_set() or error is None:
                return  # not ours any more; or a handler that did not end its task: the lease expires
            elif isinstance(error, Failure):
                task.fail(error.reason or "runtime.error", error.message, retry=error.retry)
            else:
                task.fail("runtime.error", f"{type(error).__name__}: {error}")
        except (AgentplaneError, TaskStopped):
            pass  # the lease expires and the task is queued again

    def _heartbeat(self, task: Task) -> bool:
        try:
            resp = self.client.runtime.heartbeat(lease=task.ref, timeout=max(1.0, task.deadline - time.time()))
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

    def _heartbeats(self, task: Task, done: threading.Event) -> None:
        while not done.is_set() and not task.canceled.is_set() and not task.ended:
            left = task.deadline - time.time()
            if done.wait(max(0.01, left / 3)):
                return
            if task.ended:
                return  # the lease was given up; a heartbeat would only be refused
            self._heartbeat(task)
            if time.time() > task.deadline:
                task._stop(_Stop.LEASE_LOST)  # no heartbeat succeeded before the deadline


def check_options(runtime_id: str, capacity: int, delivery: str, poll_wait: float, drain_timeout: float,
                  write_timeout: float) -> None:
    """Raises ValueError for a worker option out of range (Worker, AsyncWorker)."""
    if not runtime_id:
        raise ValueError("runtime_id is required")
    if capacity < 1:
        raise ValueError(f"capacity {capacity} must be at least 1")
    if delivery not in ("interactive", "durable"):
        raise ValueError("delivery is 'interactive' or 'durable'")
    if not 0 < poll_wait <= 30:
        raise ValueError(f"poll_wait {poll_wait} must be in (0, 30] seconds (the server caps the long poll at 30 s)")
    if drain_timeout < 0 or write_timeout <= 0:
        raise ValueError("drain_timeout must not be negative and write_timeout must be positive")
