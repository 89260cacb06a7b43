"""TaskHandle and the decision helpers: what a caller reaches for first, over the
generated service clients (which stay available for everything else).

Client.start returns a TaskHandle and Client.task makes one for an existing task id;
Client.approve, reject and edit resolve an interrupt against its argument digest.
agentplane.aio has the same on asyncio (AsyncTaskHandle)."""

import json

from agentplane.v1 import hitl_pb2, task_pb2

_S = task_pb2.TaskState
TERMINAL = frozenset({_S.TASK_STATE_COMPLETED, _S.TASK_STATE_FAILED, _S.TASK_STATE_CANCELED})


def terminal(state):
    """Whether a task in this state has ended for good (COMPLETED, FAILED, CANCELED)."""
    return state in TERMINAL


def _done(state, until_input_required):
    return state in TERMINAL or (until_input_required and state == _S.TASK_STATE_INPUT_REQUIRED)


def _changed_to(resp):
    """The state a watched StateChanged event moved to, or None."""
    if resp.WhichOneof("kind") == "event" and resp.event.WhichOneof("payload") == "state_changed":
        return resp.event.state_changed.to_state
    return None


def _continue_fields(message):
    if isinstance(message, str):
        message = {"role": "MESSAGE_ROLE_USER", "parts": [{"text": message}]}
    return {"message": message}


def _resolve_fields(interrupt_id, kind, reason, args):
    decision = {}
    if reason is not None:
        decision["reason"] = reason
    if kind == "reject":
        if not reason:
            raise ValueError("reject needs a reason")
    elif kind == "edit":
        decision["arguments_json"] = json.dumps(args, separators=(",", ":"))
    return {"interrupt_id": interrupt_id, kind: decision}


def _rid(request_id):
    # Imported here: agentplane.client imports this module for Client's base class.
    from agentplane.client import new_request_id

    return request_id or new_request_id()


_PENDING = {"states": [hitl_pb2.InterruptState.INTERRUPT_STATE_PENDING]}


class TaskHandle:
    """One task, for the calls a caller makes on it: watch, wait, continue, cancel.

    id is the task's id; started is StartTask's response (None for a handle made by
    Client.task). Every call that changes the task sends a request id: a fresh one, or
    request_id= to repeat a call safely (the server answers the first call's result).
    """

    def __init__(self, client, task_id, started=None):
        self._c = client
        self.id = task_id
        self.started = started

    def __repr__(self):
        return f"TaskHandle({self.id!r})"

    def get(self):
        """The task as it is now (a Task message)."""
        return self._c.tasks.get_task(task_id=self.id).task

    def watch(self, after_sequence=0, **kw):
        """Client.watch for this task: its events, resuming after a dropped connection."""
        return self._c.watch(self.id, after_sequence, **kw)

    def wait(self, until_input_required=False):
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
                to = _changed_to(resp)
                if not first and (to is None or not _done(to, until_input_required)):
                    continue
                first = False
                task = self.get()
                if _done(task.state, until_input_required):
                    return task
        finally:
            watch.close()
        task = self.get()
        if _done(task.state, until_input_required):
            return task
        raise RuntimeError(f"the watch of task {self.id} ended before it was done")

    def cancel(self, reason="", *, request_id=None):
        """Cancels the task (CancelTask); returns the task."""
        return self._c.tasks.cancel_task(task_id=self.id, reason=reason, request_id=_rid(request_id)).task

    def continue_(self, message, *, request_id=None):
        """Answers a chat pause with the user's next message: text, or a Message (or its
        dict). Named with a trailing underscore: `continue` is a Python keyword."""
        return self._c.tasks.continue_task(
            task_id=self.id, request_id=_rid(request_id), **_continue_fields(message)
        ).task

    def continue_tool_outputs(self, outputs, *, request_id=None):
        """Sends the outputs of the client-executed tool calls the task waits for, one per
        pending call: dicts {"call_id", "result" (plain data), "is_error"} or ToolOutput."""
        return self._c.tasks.continue_task(
            task_id=self.id, request_id=_rid(request_id), tool_outputs={"outputs": list(outputs)}
        ).task

    def interrupts(self):
        """The task's pending interrupts (ListInterrupts, first page: a task has few at a time)."""
        return list(self._c.hitl.list_interrupts(task_id=self.id, **_PENDING).interrupts)


class Helpers:
    """Client's start, task, approve, reject and edit."""

    def start(self, request=None, **fields):
        """Starts a task (StartTask: a request message or its fields) and returns its TaskHandle."""
        resp = self.tasks.start_task(request, **fields)
        return TaskHandle(self, resp.task.task_id, resp)

    def task(self, task_id):
        """The TaskHandle of an existing task; makes no call."""
        return TaskHandle(self, task_id)

    def approve(self, interrupt_id, *, reason=None, request_id=None, args_digest=None):
        """Lets a gated call run with its arguments unchanged. Like reject and edit it reads
        the interrupt first and resolves against its argument digest (or args_digest, the
        one the reviewer saw), so a call whose arguments changed in between is refused
        (FAILED_PRECONDITION, INTERRUPT_ARGS_MISMATCH) instead of approved; and it sends a
        request id (request_id= to choose it), so that repeating it is safe. Returns the
        resolved Interrupt."""
        return self._resolve(_resolve_fields(interrupt_id, "approve", reason, None), request_id, args_digest)

    def reject(self, interrupt_id, reason, *, request_id=None, args_digest=None):
        """Refuses a gated call: it does not run, and the model sees reason (required)."""
        return self._resolve(_resolve_fields(interrupt_id, "reject", reason, None), request_id, args_digest)

    def edit(self, interrupt_id, args, *, reason=None, request_id=None, args_digest=None):
        """Runs a gated call with new arguments (plain data, sent as JSON; checked against the
        tool's parameter schema)."""
        return self._resolve(_resolve_fields(interrupt_id, "edit", reason, args), request_id, args_digest)

    def _resolve(self, fields, request_id, args_digest):
        if args_digest is None:
            args_digest = self.hitl.get_interrupt(interrupt_id=fields["interrupt_id"]).interrupt.args_digest
        return self.hitl.resolve_interrupt(
            args_digest=args_digest, request_id=_rid(request_id), **fields
        ).interrupt
