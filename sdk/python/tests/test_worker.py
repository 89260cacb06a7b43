"""The runtime worker against a real control plane: an approval, a durable suspend, a
cancel, a lost lease, a failing handler, client tool outputs, a verdict, a graceful
shutdown, and a replay after a runtime process is SIGKILLed mid-call."""

import os
import subprocess
import tempfile
import threading
import unittest
from collections.abc import Callable
from typing import Any, TypeVar

import controlplane
from agentplane import Client, StopReason, from_value
from agentplane.v1 import hitl_pb2, runtime_service_pb2, task_pb2
from agentplane.worker import Failure, Handler, Task, TaskStopped, Worker

AGENT = b"apiVersion: qar/v1\nkind: AgentSpec\nname: py-worker\ninstructions: Answer briefly.\nmodel: m\n"
GATED = {"allowlist": {"tools": ["delete_file"]}}

cp: controlplane.ControlPlane  # set by setUpModule
_T = TypeVar("_T")


def setUpModule() -> None:
    global cp
    cp = controlplane.ControlPlane()


def tearDownModule() -> None:
    if "cp" in globals():
        cp.stop()


def wait_for(what: str, pred: Callable[[], _T | None], timeout: float = 30.0) -> _T:
    done = threading.Event()
    for _ in range(int(timeout / 0.05)):
        v = pred()
        if v:
            return v
        done.wait(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


class WorkerTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(cp.address)
        self.addCleanup(self.c.close)

    def run_worker(self, handler: Handler, runtime_id: str, **kw: Any) -> Worker:
        w = Worker(self.c, handler, runtime_id, queues=[runtime_id], poll_wait=0.2, **kw)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()

        def stop() -> None:
            w.stop()
            t.join(30)
            self.assertFalse(t.is_alive(), "the worker did not stop")

        self.addCleanup(stop)
        return w

    def start(self, queue: str) -> task_pb2.Task:
        return self.c.tasks.start_task(document=AGENT, queue=queue, interrupt_policy=GATED,
                                       input={"parts": [{"text": "clean up"}]}).task

    def state(self, task_id: str) -> int:
        return self.c.tasks.get_task(task_id=task_id).task.state

    def pending_interrupt(self, task_id: str) -> hitl_pb2.Interrupt | None:
        its = [i for i in self.c.hitl.list_interrupts().interrupts if i.task_id == task_id]
        return its[0] if its else None

    def agent(self, runs: list[str]) -> Handler:
        def handler(task: Task) -> None:
            runs.append(task.task_id)
            task.say("working on " + task.input_text)
            gate = task.tool_call("c1", "delete_file", '{"path": "/tmp/x"}')
            if gate.reported:
                task.complete(text="already done")
                return
            self.assertTrue(gate.allowed, gate.reason)
            task.tool_result("c1", "delete_file", {"deleted": True})
            task.complete(output={"structured": {"ran": gate.arguments_json}})

        return handler

    def test_interactive_approval(self):
        runs: list[str] = []
        self.run_worker(self.agent(runs), "py-interactive")
        t = self.start("py-interactive")
        it = wait_for("an interrupt", lambda: self.pending_interrupt(t.task_id))
        self.c.hitl.resolve_interrupt(interrupt_id=it.interrupt_id, approve={})
        wait_for("completed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_COMPLETED)
        out = self.c.tasks.get_task(task_id=t.task_id).task.output
        self.assertEqual(from_value(out.structured), {"ran": '{"path": "/tmp/x"}'})
        self.assertEqual(runs, [t.task_id])

    def test_durable_suspend_and_resume(self):
        runs: list[str] = []
        self.run_worker(self.agent(runs), "py-durable", delivery="durable")
        t = self.start("py-durable")
        it = wait_for("an interrupt", lambda: self.pending_interrupt(t.task_id))
        wait_for("the lease given up", lambda: len(runs) == 1 and self.state(t.task_id) != task_pb2.TASK_STATE_WORKING)
        self.c.hitl.resolve_interrupt(interrupt_id=it.interrupt_id, approve={})
        wait_for("completed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_COMPLETED)
        self.assertEqual(runs, [t.task_id, t.task_id], "the handler did not run again on the resumed lease")
        events = self.c.tasks.list_task_events(task_id=t.task_id).events
        calls = [e for e in events if e.WhichOneof("payload") == "tool_call"]
        self.assertEqual(len(calls), 1, "the gated call was reported twice")

    def test_cancel(self):
        stopped: list[str] = []
        running = threading.Event()

        def handler(task: Task) -> None:
            task.say("long job")
            running.set()
            task.canceled.wait(30)
            stopped.append(task.stop_reason)

        self.run_worker(handler, "py-cancel")
        t = self.c.tasks.start_task(document=AGENT, queue="py-cancel").task
        self.assertTrue(running.wait(30), "the handler never ran")
        self.c.tasks.cancel_task(task_id=t.task_id, reason="user")
        wait_for("the handler told", lambda: stopped)
        self.assertEqual(stopped, ["canceled"])

    def test_lease_lost(self):
        seen: list[str] = []

        def handler(task: Task) -> None:
            if seen:
                seen.append("second lease")
                task.complete(text="done")
                return
            # Someone else ends this lease behind the worker's back (handed back for a retry).
            self.c.runtime.fail_task(lease=task.ref, reason="test.handback", message="taken away", retry=True)
            try:
                task.say("still mine?")
                seen.append("write: accepted")
            except TaskStopped as e:
                seen.append(f"write: {e}")
            seen.append(task.stop_reason if task.canceled.is_set() else "not stopped")

        self.run_worker(handler, "py-lost")
        t = self.c.tasks.start_task(document=AGENT, queue="py-lost").task
        wait_for("completed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_COMPLETED)
        self.assertEqual(seen, [f"write: {StopReason.LEASE_LOST}", StopReason.LEASE_LOST, "second lease"])

    def test_handler_exception_fails_the_task(self):
        def handler(task: Task) -> None:
            raise ValueError("boom")

        self.run_worker(handler, "py-fail")
        t = self.c.tasks.start_task(document=AGENT, queue="py-fail").task
        wait_for("failed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_FAILED)
        self.assertIn("boom", self.c.tasks.get_task(task_id=t.task_id).task.failure.message)

    def test_failure_chooses_reason_and_retry(self):
        attempts: list[int] = []

        def handler(task: Task) -> None:
            attempts.append(task.attempt)
            if len(attempts) == 1:
                raise Failure("test.flaky", "try again", retry=True)
            task.complete(text="second time")

        self.run_worker(handler, "py-failure")
        t = self.c.tasks.start_task(document=AGENT, queue="py-failure").task
        wait_for("completed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_COMPLETED)
        self.assertEqual(attempts, [1, 2])

    def test_tool_outputs_from_the_client(self):
        # lookup is a function tool the client runs: the task waits for its output.
        spec = {"apiVersion": "qar/v1", "kind": "AgentSpec", "name": "py-worker", "instructions": "Answer.",
                "model": "m", "tools": [{"type": "function", "function": {
                    "name": "lookup", "description": "Look a key up",
                    "parameters": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"],
                                   "additionalProperties": False}}}]}
        seen: list[Any] = []

        def handler(task: Task) -> None:
            if task.continue_tool_results:
                r = task.continue_tool_results[0]
                seen.append((r.call_id, from_value(r.result)))
                task.complete(output={"structured": from_value(r.result)})
                return
            gate = task.tool_call("c1", "lookup", '{"key": "k"}')
            self.assertTrue(gate.allowed, gate.reason)
            its = task.wait_for_tool_outputs("py-worker", gate)
            seen.append([it.kind for it in its])

        self.run_worker(handler, "py-outputs")
        t = self.c.tasks.start_task(spec=spec, queue="py-outputs").task
        wait_for("waiting for the output", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_INPUT_REQUIRED)
        self.c.tasks.continue_task(task_id=t.task_id,
                                   tool_outputs={"outputs": [{"call_id": "c1", "result": {"value": 7}}]})
        wait_for("completed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_COMPLETED)
        self.assertEqual(seen, [[hitl_pb2.INTERRUPT_KIND_TOOL_OUTPUT_REQUIRED], ("c1", {"value": 7.0})])

    def test_record_verdict_and_pause(self):
        with open(os.path.join(controlplane.REPO, "examples", "graphs", "write-review.yaml"), "rb") as f:
            graph = f.read()
        recorded: list[runtime_service_pb2.RecordVerdictResponse] = []

        def handler(task: Task) -> None:
            if task.continue_messages:
                task.complete(text="thanks")
                return
            resp = task.record_verdict("critic", {"verdict": "pass", "rationale": "no errors found"},
                                       raised=["cite the source"])
            recorded.append(resp)
            task.pause("reviewed; anything else?", node="lead")

        self.run_worker(handler, "py-verdict")
        t = self.c.tasks.start_task(document=graph, queue="py-verdict").task
        wait_for("paused", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_INPUT_REQUIRED)
        verdicts = self.c.tasks.list_verdicts(task_id=t.task_id).verdicts
        self.assertEqual([(v.node, v.result.verdict) for v in verdicts], [("critic", "pass")])
        self.assertEqual([o.text for o in recorded[0].open_obligations], ["cite the source"])
        self.c.tasks.continue_task(task_id=t.task_id, message={"parts": [{"text": "no"}]})
        wait_for("completed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_COMPLETED)

    def test_stop_cuts_the_default_long_poll_short(self):
        w = Worker(self.c, lambda task: None, "py-long-poll", queues=["py-long-poll"])
        self.assertEqual(w.poll_wait, 20.0)
        th = threading.Thread(target=w.run, daemon=True)
        th.start()
        wait_for("the long poll", lambda: w._poll is not None)  # pyright: ignore[reportPrivateUsage]
        w.stop()
        th.join(10)  # half the poll's wait: stop() cancelled the call instead of waiting it out
        self.assertFalse(th.is_alive(), "run did not return: stop() waited for the long poll")

    def test_graceful_shutdown_hands_back(self):
        stopped: list[str] = []
        running = threading.Event()

        def handler(task: Task) -> None:
            running.set()
            task.canceled.wait(30)
            stopped.append(task.stop_reason)

        w = Worker(self.c, handler, "py-stop", queues=["py-stop"], poll_wait=0.2)
        th = threading.Thread(target=w.run, daemon=True)
        th.start()
        t = self.c.tasks.start_task(document=AGENT, queue="py-stop").task
        self.assertTrue(running.wait(30), "the handler never ran")
        self.assertFalse(w.stop(timeout=0.2), "the task ended on its own")
        th.join(30)
        self.assertFalse(th.is_alive(), "run did not return")
        self.assertEqual(stopped, ["stopping"])
        self.assertEqual(self.state(t.task_id), task_pb2.TASK_STATE_SUBMITTED, "not handed back to the queue")

    def test_stop_ends_an_interactive_wait(self):
        stopped: list[str] = []

        def handler(task: Task) -> None:
            try:
                task.tool_call("c1", "delete_file", '{"path": "/tmp/x"}')  # gated: waits on AwaitDecision
                stopped.append("decided?")
            except TaskStopped as e:
                stopped.append(str(e))
                raise

        w = Worker(self.c, handler, "py-stop-wait", queues=["py-stop-wait"], poll_wait=0.2)
        th = threading.Thread(target=w.run, daemon=True)
        th.start()
        t = self.start("py-stop-wait")
        wait_for("an interrupt", lambda: self.pending_interrupt(t.task_id))
        self.assertFalse(w.stop(timeout=0.2))
        th.join(30)
        self.assertFalse(th.is_alive(), "run did not return: the wait for the decision was not ended")
        self.assertEqual(stopped, ["stopping"])
        self.assertNotEqual(self.state(t.task_id), task_pb2.TASK_STATE_WORKING)


class CrashReplayTest(unittest.TestCase):
    """A runtime process is SIGKILLed after running a call and before reporting its result;
    the next lease finds the call reported (not run again) and its history."""

    def test_replay_after_a_crash(self):
        cp2 = controlplane.ControlPlane(config_yaml="tasks:\n  lease_ttl: 1s\n")
        self.addCleanup(cp2.stop)
        c = Client(cp2.address)
        self.addCleanup(c.close)
        effects = os.path.join(tempfile.mkdtemp(prefix="agentplane-pyeffects-"), "effects")
        proc = subprocess.Popen(["/usr/bin/python3", os.path.join(controlplane.HERE, "crash_runtime.py"), cp2.address,
                                 effects, "py-crash"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        t = c.tasks.start_task(document=AGENT, queue="py-crash", input={"parts": [{"text": "clean up"}]}).task
        assert proc.stdout is not None
        self.assertEqual(proc.stdout.readline().strip(), "RAN")
        proc.kill()  # SIGKILL: no hand-back, the lease just stops being heartbeaten
        proc.wait(30)
        proc.stdout.close()

        replay: list[tuple[int, bool, bool, bool, list[str]]] = []

        def handler(task: Task) -> None:
            gate = task.tool_call("c1", "delete_file", '{"path": "/tmp/x"}')
            calls = [e.tool_call.call_id for e in task.history() if e.WhichOneof("payload") == "tool_call"]
            replay.append((task.attempt, gate.reported, gate.result_reported, gate.allowed, calls))
            if gate.reported and not gate.result_reported:
                task.tool_result("c1", "delete_file", "lost in a crash", is_error=True)
            task.complete(text="done")

        w = Worker(c, handler, "py-replaying", queues=["py-crash"], poll_wait=0.2)
        th = threading.Thread(target=w.run, daemon=True)
        th.start()
        self.addCleanup(lambda: (w.stop(), th.join(30)))
        wait_for("completed", lambda: c.tasks.get_task(task_id=t.task_id).task.state == task_pb2.TASK_STATE_COMPLETED)
        self.assertEqual(replay, [(2, True, False, False, ["c1"])])
        with open(effects) as f:
            self.assertEqual(f.read(), "ran c1\n", "the tool ran again after the crash")


if __name__ == "__main__":
    unittest.main()
