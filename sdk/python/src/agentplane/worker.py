"""Worker: a runtime's lease loop, a first slice of Go's client/worker.

A Worker long-polls RuntimeService.LeaseTasks for up to `capacity` tasks at a time
and runs each leased task in its own thread, calling handler(task). It heartbeats
once before the handler runs (acknowledging the lease) and then in the background;
task.canceled is set when a heartbeat says the task was canceled or the lease is
lost: refused as lease.lost, or no heartbeat succeeded before the lease deadline
(task.stop_reason says which), and the Task's writes then raise TaskStopped.

The handler ends its task with task.complete, task.fail or task.suspend. An
exception from the handler fails the task (reason "runtime.error"); after a cancel or a
lost lease nothing is written. task.tool_call asks the gate (CheckToolCall) before a
tool runs: on an interrupt it waits for the decision on AwaitDecision while heartbeats
keep the lease ("interactive"), or gives the lease up with SuspendTask and raises
Suspended ("durable"); the next lease carries the decision, which tool_call then
returns for the same call id without asking again. A call the gate says was already
reported under an earlier lease comes back with gate.reported set: do not run it again.

Not yet ported from Go: retries of transient errors on the task's writes, drain with
a deadline, pause, verdicts and deltas helpers (use task.client.runtime directly).
"""

import threading
import time

import grpc

from agentplane.errors import AgentplaneError
from agentplane.v1 import hitl_pb2

APPROVE = hitl_pb2.DECISION_TYPE_APPROVE
EDIT = hitl_pb2.DECISION_TYPE_EDIT


class TaskStopped(Exception):
    """The task was canceled or its lease lost: it is no longer this runtime's to write."""


class Suspended(Exception):
    """The task gave its lease up to wait durably for a decision."""


class Gate:
    """The gate's answer for one tool call."""

    def __init__(self, allowed, arguments_json="", reason="", decision=None, interrupt=None, reported=False,
                 result_reported=False):
        self.allowed = allowed
        self.arguments_json = arguments_json
        self.reason = reason
        self.decision = decision
        self.interrupt = interrupt
        self.reported = reported
        self.result_reported = result_reported


class Task:
    """One leased task, handed to the handler."""

    def __init__(self, worker, lease):
        self.client = worker.client
        self.lease = lease
        self.task_id = lease.task.task_id
        self.ref = {"task_id": self.task_id, "lease_id": lease.lease_id, "epoch": lease.epoch}
        self.canceled = threading.Event()
        self.stop_reason = ""
        self.ended = ""
        self._delivery = worker.delivery
        # The node a tool call belongs to by default: the agent of an AgentSpec task.
        self.agent_name = lease.spec.agent.name if lease.spec.WhichOneof("spec") == "agent" else ""
        self._resolved = {it.call_id: it for it in lease.resolved_interrupts if it.call_id}

    @property
    def input_text(self):
        return "".join(p.text for p in self.lease.task.input.parts if p.WhichOneof("kind") == "text")

    def _stop(self, why):
        if not self.canceled.is_set():
            self.stop_reason = why
            self.canceled.set()

    def _write(self, call, **fields):
        if self.canceled.is_set():
            raise TaskStopped(self.stop_reason)
        try:
            return call(lease=self.ref, **fields)
        except AgentplaneError as e:
            if e.reason == "lease.lost":
                self._stop("lease.lost")
                raise TaskStopped("lease.lost") from e
            raise

    def report(self, *events):
        """Reports runtime events (dicts or RuntimeEvent messages), in order."""
        return self._write(self.client.runtime.report_events, events=list(events))

    def say(self, text, node=""):
        return self.report({"message": {"role": "MESSAGE_ROLE_ASSISTANT", "parts": [{"text": text}], "node": node}})

    def tool_call(self, call_id, name, arguments_json="{}", node=""):
        """Asks the gate about a tool call; returns a Gate (raises Suspended in durable mode).

        node is the agent making the call; empty means the task's agent (AgentSpec tasks).
        """
        node = node or self.agent_name
        it = self._resolved.pop(call_id, None)
        if it is not None:
            gate = self._gate_of(it.decision, arguments_json)
            gate.interrupt = it
        else:
            resp = self._write(self.client.runtime.check_tool_call, call_id=call_id, tool_name=name,
                               arguments_json=arguments_json, agent_name=node)
            if resp.call_reported:
                return Gate(False, reported=True, result_reported=resp.result_reported, decision=resp.decision,
                            interrupt=resp.interrupt,
                            reason=f"call {call_id} was already run under an earlier lease of this task")
            if resp.outcome == hitl_pb2.GATE_OUTCOME_ALLOW:
                gate = Gate(True, arguments_json, decision=resp.decision)
            elif resp.outcome == hitl_pb2.GATE_OUTCOME_REJECT:
                gate = self._gate_of(resp.decision, arguments_json)
                gate.reason = gate.reason or resp.reason
            else:
                if self._delivery == "durable":
                    self.suspend()
                    raise Suspended(f"interrupt {resp.interrupt.interrupt_id}, call {call_id}")
                gate = self._gate_of(self.await_decision(resp.interrupt.interrupt_id), arguments_json)
                gate.interrupt = resp.interrupt
        call = {"call_id": call_id, "tool_name": name, "node": node}
        if gate.allowed:
            self.report({"tool_call": dict(call, arguments_json=gate.arguments_json)})
        else:
            self.report({"tool_call": dict(call, arguments_json=arguments_json)},
                        {"tool_result": dict(call, result=gate.reason, is_error=True)})
        return gate

    @staticmethod
    def _gate_of(dec, arguments_json):
        if dec.type == APPROVE:
            return Gate(True, arguments_json, decision=dec)
        if dec.type == EDIT:
            return Gate(True, dec.arguments_json, decision=dec)
        return Gate(False, reason=dec.model_reason or dec.reason, decision=dec)

    def await_decision(self, interrupt_id):
        """Waits for the decision on an interrupt (AwaitDecision), reconnecting on UNAVAILABLE."""
        while True:
            if self.canceled.is_set():
                raise TaskStopped(self.stop_reason)
            try:
                for m in self.client.runtime.await_decision(lease=self.ref, interrupt_id=interrupt_id):
                    kind = m.WhichOneof("kind")
                    if kind == "decision":
                        return m.decision
                    if kind == "canceled":
                        self._stop("canceled")
                        raise TaskStopped("canceled")
            except AgentplaneError as e:
                if e.reason == "lease.lost":
                    self._stop("lease.lost")
                    raise TaskStopped("lease.lost") from e
                if e.code != grpc.StatusCode.UNAVAILABLE:
                    raise
            time.sleep(0.2)

    def tool_result(self, call_id, name, result, is_error=False, node=""):
        return self.report({"tool_result": {"call_id": call_id, "tool_name": name, "result": result,
                                            "is_error": is_error, "node": node}})

    def complete(self, output=None, text=None):
        """Completes the task with output (a TaskOutput dict) or a text answer."""
        if text is not None:
            output = {"message": {"role": "MESSAGE_ROLE_ASSISTANT", "parts": [{"text": text}]}}
        self._write(self.client.runtime.complete_task, output=output or {})
        self.ended = "completed"

    def fail(self, reason, message, retry=False):
        self._write(self.client.runtime.fail_task, reason=reason, message=message, retry=retry)
        self.ended = "failed"

    def suspend(self):
        self._write(self.client.runtime.suspend_task)
        self.ended = "suspended"


class Worker:
    """Leases tasks for runtime_id and runs handler(task) for each, capacity at a time."""

    def __init__(self, client, handler, runtime_id, capacity=1, queues=(), delivery="interactive", poll_wait=1.0):
        if delivery not in ("interactive", "durable"):
            raise ValueError("delivery is 'interactive' or 'durable'")
        self.client = client
        self.handler = handler
        self.runtime_id = runtime_id
        self.capacity = capacity
        self.queues = list(queues)
        self.delivery = delivery
        self.poll_wait = poll_wait
        self._stopping = threading.Event()
        self._slots = threading.Semaphore(capacity)
        self._threads = []

    def stop(self):
        """Asks run to return once the running tasks end."""
        self._stopping.set()

    def run(self):
        """Leases and runs tasks until stop(); then waits for the running tasks."""
        try:
            while not self._stopping.is_set():
                if not self._slots.acquire(timeout=self.poll_wait):
                    continue  # every slot busy: check for stop, then wait again
                free = 1
                while free < self.capacity and self._slots.acquire(blocking=False):
                    free += 1
                leases = []
                if not self._stopping.is_set():
                    try:
                        leases = self.client.runtime.lease_tasks(runtime_id=self.runtime_id, max_tasks=free,
                                                                 wait=self.poll_wait, queues=self.queues).leases
                    except AgentplaneError as e:
                        if e.code != grpc.StatusCode.UNAVAILABLE and e.retry_delay is None:
                            raise
                        time.sleep(e.retry_delay or 0.2)
                for _ in range(free - len(leases)):
                    self._slots.release()
                for lease in leases:
                    t = threading.Thread(target=self._run_task, args=(Task(self, lease),), daemon=True)
                    self._threads.append(t)
                    t.start()
        finally:
            for t in self._threads:
                t.join()

    def _run_task(self, task):
        done = threading.Event()
        try:
            if not self._heartbeat(task):
                return
            hb = threading.Thread(target=self._heartbeats, args=(task, done), daemon=True)
            hb.start()
            try:
                self.handler(task)
            except (TaskStopped, Suspended):
                pass
            except Exception as e:  # the handler's failure fails the task
                if not task.canceled.is_set() and not task.ended:
                    try:
                        task.fail("runtime.error", f"{type(e).__name__}: {e}")
                    except (AgentplaneError, TaskStopped):
                        pass
            done.set()
            hb.join()
        finally:
            done.set()
            self._slots.release()

    def _heartbeat(self, task):
        try:
            resp = self.client.runtime.heartbeat(lease=task.ref)
        except AgentplaneError as e:
            if e.reason == "lease.lost" or e.code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION):
                task._stop("lease.lost")
                return False
            return True  # transient: the next beat tries again
        task.deadline = resp.deadline.ToNanoseconds() / 1e9
        if resp.canceled:
            task._stop("canceled")
            return False
        return True

    def _heartbeats(self, task, done):
        while not done.is_set() and not task.canceled.is_set():
            left = getattr(task, "deadline", time.time() + 3) - time.time()
            if done.wait(max(0.1, min(left / 3, 5.0))):
                return
            self._heartbeat(task)
            if time.time() > getattr(task, "deadline", float("inf")):
                task._stop("lease.lost")  # no heartbeat succeeded before the deadline
