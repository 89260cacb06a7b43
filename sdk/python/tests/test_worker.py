"""The runtime worker against a real control plane: an approval, a durable suspend, a
cancel, a lost lease and a failing handler."""

import threading
import unittest

import controlplane
from agentplane import Client, from_value
from agentplane.v1 import task_pb2
from agentplane.worker import TaskStopped, Worker

AGENT = b"apiVersion: qar/v1\nkind: AgentSpec\nname: py-worker\ninstructions: Answer briefly.\nmodel: m\n"
GATED = {"allowlist": {"tools": ["delete_file"]}}

cp = None


def setUpModule():
    global cp
    cp = controlplane.ControlPlane()


def tearDownModule():
    if cp:
        cp.stop()


def wait_for(what, pred, timeout=30.0):
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

    def run_worker(self, handler, runtime_id, **kw):
        w = Worker(self.c, handler, runtime_id, queues=[runtime_id], poll_wait=0.2, **kw)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()

        def stop():
            w.stop()
            t.join(30)
            self.assertFalse(t.is_alive(), "the worker did not stop")

        self.addCleanup(stop)
        return w

    def start(self, queue):
        return self.c.tasks.start_task(document=AGENT, queue=queue, interrupt_policy=GATED,
                                       input={"parts": [{"text": "clean up"}]}).task

    def state(self, task_id):
        return self.c.tasks.get_task(task_id=task_id).task.state

    def pending_interrupt(self, task_id):
        its = [i for i in self.c.hitl.list_interrupts().interrupts if i.task_id == task_id]
        return its[0] if its else None

    def agent(self, runs):
        def handler(task):
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
        runs = []
        self.run_worker(self.agent(runs), "py-interactive")
        t = self.start("py-interactive")
        it = wait_for("an interrupt", lambda: self.pending_interrupt(t.task_id))
        self.c.hitl.resolve_interrupt(interrupt_id=it.interrupt_id, approve={})
        wait_for("completed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_COMPLETED)
        out = self.c.tasks.get_task(task_id=t.task_id).task.output
        self.assertEqual(from_value(out.structured), {"ran": '{"path": "/tmp/x"}'})
        self.assertEqual(runs, [t.task_id])

    def test_durable_suspend_and_resume(self):
        runs = []
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
        stopped = []
        running = threading.Event()

        def handler(task):
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
        seen = []

        def handler(task):
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
        self.assertEqual(seen, ["write: lease.lost", "lease.lost", "second lease"])

    def test_handler_exception_fails_the_task(self):
        def handler(task):
            raise ValueError("boom")

        self.run_worker(handler, "py-fail")
        t = self.c.tasks.start_task(document=AGENT, queue="py-fail").task
        wait_for("failed", lambda: self.state(t.task_id) == task_pb2.TASK_STATE_FAILED)
        self.assertIn("boom", self.c.tasks.get_task(task_id=t.task_id).task.failure.message)


if __name__ == "__main__":
    unittest.main()
