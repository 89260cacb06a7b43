"""TaskHandle and the decision helpers: what a caller reaches for first, over the
generated service clients (which stay available for everything else).

Client.start returns a TaskHandle and Client.task makes one for an existing task id;
Client.approve, reject and edit resolve an interrupt against its argument digest.
agentplane.aio has the same on asyncio (AsyncTaskHandle)."""

import json
from collections.abc import Generator, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Union

from agentplane._ids import new_request_id
from agentplane.enums import InterruptState, TaskState
from agentplane.v1 import hitl_pb2, task_pb2, task_service_pb2

if TYPE_CHECKING:
    from agentplane._services import HitlService, TaskService
    from agentplane.client import Client

# What continue_ takes: the user's text, a Message, or the Message's fields as a dict.
MessageArg = Union[str, task_pb2.Message, Mapping[str, Any]]
# One output of a client-executed tool call: a ToolOutput, or its fields as a dict
# ({"call_id", "result" (plain data), "is_error"}).
ToolOutputArg = Union[task_service_pb2.ToolOutput, Mapping[str, Any]]

TERMINAL = frozenset({TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED})


def terminal(state: int) -> bool:
    """Whether a task in this state has ended for good (COMPLETED, FAILED, CANCELED)."""
    return state in TERMINAL


def done(state: int, until_input_required: bool) -> bool:
    return state in TERMINAL or (until_input_required and state == TaskState.INPUT_REQUIRED)


def changed_to(resp: task_service_pb2.WatchTaskResponse) -> int | None:
    """The state a watched StateChanged event moved to, or None."""
    if resp.WhichOneof("kind") == "event" and resp.event.WhichOneof("payload") == "state_changed":
        return resp.event.state_changed.to_state
    return None


def continue_fields(message: MessageArg) -> dict[str, Any]:
    if isinstance(message, str):
        message = {"role": "MESSAGE_ROLE_USER", "parts": [{"text": message}]}
    return {"message": message}


def resolve_fields(interrupt_id: str, kind: str, reason: str | None, args: Any) -> dict[str, Any]:
    decision: dict[str, Any] = {}
    if reason is not None:
        decision["reason"] = reason
    if kind == "reject":
        if not reason:
            raise ValueError("reject needs a reason")
    elif kind == "edit":
        decision["arguments_json"] = json.dumps(args, separators=(",", ":"))
    return {"interrupt_id": interrupt_id, kind: decision}


def rid(request_id: str | None) -> str:
    return request_id or new_request_id()


PENDING: dict[str, Any] = {"states": [InterruptState.PENDING]}


class TaskHandle:
    """One task, for the calls a caller makes on it: watch, wait, continue, cancel.

    id is the task's id; started is StartTask's response (None for a handle made by
    Client.task). Every call that changes the task sends a request id: a fresh one, or
    request_id= to repeat a call safely (the server answers the first call's result).
    """

    def __init__(self, client: "Client", task_id: str,
                 started: task_service_pb2.StartTaskResponse | None = None) -> None:
        self._c = client
        self.id = task_id
        self.started = started

    def __repr__(self) -> str:
        return f"TaskHandle({self.id!r})"

    def get(self) -> task_pb2.Task:
        """The task as it is now (a Task message)."""
        return self._c.tasks.get_task(task_id=self.id).task

    def watch(self, after_sequence: int = 0, *, keepalives: bool = False,
              max_reconnects: int | None = None) -> Generator[task_service_pb2.WatchTaskResponse, None, None]:
        """Client.watch for this task: its events, resuming after a dropped connection."""
        return self._c.watch(self.id, after_sequence, keepalives=keepalives, max_reconnects=max_reconnects)

    def wait(self, until_input_required: bool = False) -> task_pb2.Task:
        """Returns the task once it is in a terminal state (COMPLETED, FAILED, CANCELED),
        or, with until_input_required, INPUT_REQUIRED. A task that waits for input is not
        terminal: without the flag wait keeps waiting while someone else answers it. The
        state is read with GetTask when the stream is open and whenever the watch reports a
        change to a state wanted, so what it returns is the state the task is in, never one
        it passed through earlier."""
        first = True
        watch = self.watch()
        try:
            for resp in watch:
                to = changed_to(resp)
                if not first and (to is None or not done(to, until_input_required)):
                    continue
                first = False
                task = self.get()
                if done(task.state, until_input_required):
                    return task
        finally:
            watch.close()
        task = self.get()
        if done(task.state, until_input_required):
            return task
        raise RuntimeError(f"the watch of task {self.id} ended before it was done")

    def cancel(self, reason: str = "", *, request_id: str | None = None) -> task_pb2.Task:
        """Cancels the task (CancelTask); returns the task."""
        return self._c.tasks.cancel_task(task_id=self.id, reason=reason, request_id=rid(request_id)).task

    def continue_(self, message: MessageArg, *, request_id: str | None = None) -> task_pb2.Task:
        """Answers a chat pause with the user's next message: text, or a Message (or its
        dict). Named with a trailing underscore: `continue` is a Python keyword."""
        return self._c.tasks.continue_task(
            task_id=self.id, request_id=rid(request_id), **continue_fields(message)
        ).task

    def continue_tool_outputs(self, outputs: Iterable[ToolOutputArg], *,
                              request_id: str | None = None) -> task_pb2.Task:
        """Sends the outputs of the client-executed tool calls the task waits for, one per
        pending call: dicts {"call_id", "result" (plain data), "is_error"} or ToolOutput."""
        return self._c.tasks.continue_task(
            task_id=self.id, request_id=rid(request_id), tool_outputs={"outputs": list(outputs)}
        ).task

    def interrupts(self) -> list[hitl_pb2.Interrupt]:
        """The task's pending interrupts (ListInterrupts, first page: a task has few at a time)."""
        return list(self._c.hitl.list_interrupts(task_id=self.id, **PENDING).interrupts)


class Helpers:
    """Client's start, task, approve, reject and edit."""

    tasks: "TaskService"
    hitl: "HitlService"

    def _client(self) -> "Client":
        from agentplane.client import Client

        assert isinstance(self, Client)
        return self

    def start(self, request: task_service_pb2.StartTaskRequest | None = None, **fields: Any) -> TaskHandle:
        """Starts a task (StartTask: a request message or its fields) and returns its TaskHandle."""
        resp = self.tasks.start_task(request, **fields)
        return TaskHandle(self._client(), resp.task.task_id, resp)

    def task(self, task_id: str) -> TaskHandle:
        """The TaskHandle of an existing task; makes no call."""
        return TaskHandle(self._client(), task_id)

    def approve(self, interrupt_id: str, *, reason: str | None = None, request_id: str | None = None,
                args_digest: str | None = None) -> hitl_pb2.Interrupt:
        """Lets a gated call run with its arguments unchanged. Like reject and edit it reads
        the interrupt first and resolves against its argument digest (or args_digest, the
        one the reviewer saw), so a call whose arguments changed in between is refused
        (FAILED_PRECONDITION, INTERRUPT_ARGS_MISMATCH) instead of approved; and it sends a
        request id (request_id= to choose it), so that repeating it is safe. Returns the
        resolved Interrupt."""
        return self._resolve(resolve_fields(interrupt_id, "approve", reason, None), request_id, args_digest)

    def reject(self, interrupt_id: str, reason: str, *, request_id: str | None = None,
               args_digest: str | None = None) -> hitl_pb2.Interrupt:
        """Refuses a gated call: it does not run, and the model sees reason (required)."""
        return self._resolve(resolve_fields(interrupt_id, "reject", reason, None), request_id, args_digest)

    def edit(self, interrupt_id: str, args: Any, *, reason: str | None = None, request_id: str | None = None,
             args_digest: str | None = None) -> hitl_pb2.Interrupt:
        """Runs a gated call with new arguments (plain data, sent as JSON; checked against the
        tool's parameter schema)."""
        return self._resolve(resolve_fields(interrupt_id, "edit", reason, args), request_id, args_digest)

    def _resolve(self, fields: dict[str, Any], request_id: str | None,
                 args_digest: str | None) -> hitl_pb2.Interrupt:
        if args_digest is None:
            args_digest = self.hitl.get_interrupt(interrupt_id=fields["interrupt_id"]).interrupt.args_digest
        return self.hitl.resolve_interrupt(
            args_digest=args_digest, request_id=rid(request_id), **fields
        ).interrupt
