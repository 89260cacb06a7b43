"""Stopping and outages against a real control plane: a runtime process stopped by
SIGTERM during an interactive approval wait exits 0 once its drain timeout passed and
leaves the task suspended for another runtime; a step before a durable wait is not
repeated by the lease that resumes the task; and a control plane that goes away and
comes back on the same address (the bbolt store) costs a running task nothing."""

import os
import subprocess
import tempfile
import threading
import time
import unittest
from typing import Any

import grpc

import controlplane
from agentplane import AgentplaneError, Client
from agentplane.v1 import task_pb2
from agentplane.worker import Handler, Task, Worker
from test_worker import wait_for

AGENT = b"apiVersion: qar/v1\nkind: AgentSpec\nname: py-drain\ninstructions: Answer briefly.\nmodel: m\n"
GATED = {"allowlist": {"tools": ["send_email"]}}


def email_handler(effects: str) -> Handler:
    """Says "working on it" once (a step), sends an email through the gate (the side
    effect is a line appended to effects) and completes."""

    def handler(task: Task) -> None:
        task.step("ack", lambda: task.say("working on it") and None)
        gate = task.tool_call("e1", "send_email", '{"to": "d@example.com"}')
        if not gate.allowed:
            raise RuntimeError("not allowed: " + gate.reason)
        with open(effects, "a") as f:
            f.write("sent\n")
        task.tool_result("e1", "send_email", "sent")
        task.complete(text="emailed")

    return handler


class DrainTest(unittest.TestCase):
    cp: controlplane.ControlPlane

    @classmethod
    def setUpClass(cls) -> None:
        cls.cp = controlplane.ControlPlane()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.cp.stop()

    def setUp(self):
        self.c = Client(self.cp.address)
        self.addCleanup(self.c.close)
        self.effects = os.path.join(tempfile.mkdtemp(prefix="agentplane-pydrain-"), "effects")
        open(self.effects, "w").close()

    def start(self, queue: str, gated: bool = True) -> str:
        return self.c.tasks.start_task(document=AGENT, queue=queue, interrupt_policy=GATED if gated else None,
                                       input={"parts": [{"text": "email them"}]}).task.task_id

    def task(self, task_id: str) -> task_pb2.Task:
        return self.c.tasks.get_task(task_id=task_id).task

    def approve_all(self, task_id: str) -> int:
        n = 0
        for it in self.c.hitl.list_interrupts(task_id=task_id).interrupts:
            self.c.hitl.resolve_interrupt(interrupt_id=it.interrupt_id, args_digest=it.args_digest, approve={})
            n += 1
        return n

    def said(self, task_id: str, text: str) -> int:
        evs = self.c.tasks.list_task_events(task_id=task_id, page_size=500).events
        return sum(1 for e in evs if e.WhichOneof("payload") == "message" and any(p.text == text for p in e.message.parts))

    def sent(self) -> int:
        with open(self.effects) as f:
            return len(f.read().splitlines())

    def run_worker(self, handler: Handler, runtime_id: str, queue: str, **kw: Any) -> Worker:
        w = Worker(self.c, handler, runtime_id, queues=[queue], poll_wait=0.2, **kw)
        th = threading.Thread(target=w.run, daemon=True)
        th.start()

        def stop() -> None:
            w.stop()
            th.join(30)

        self.addCleanup(stop)
        return w

    def test_sigterm_during_an_interactive_wait(self):
        task_id = self.start("py-drain")
        proc = subprocess.Popen(["/usr/bin/python3", os.path.join(controlplane.HERE, "drain_runtime.py"), self.cp.address,
                                 self.effects, "py-drain"])
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        wait_for("the interactive wait", lambda: self.c.hitl.list_interrupts(task_id=task_id).interrupts)
        proc.terminate()  # SIGTERM
        self.assertEqual(proc.wait(30), 0, "the runtime's exit code after SIGTERM")
        t = self.task(task_id)
        self.assertEqual((t.state, t.attempt), (task_pb2.TASK_STATE_INPUT_REQUIRED, 1), "suspended, waiting for the decision")

        self.assertEqual(self.approve_all(task_id), 1)
        self.run_worker(email_handler(self.effects), "py-second", "py-drain")
        wait_for("completed", lambda: self.task(task_id).state == task_pb2.TASK_STATE_COMPLETED)
        self.assertEqual(self.sent(), 1, "the tool ran once")
        self.assertEqual(self.said(task_id, "working on it"), 1, "the acknowledgement was said once")

    def test_step_is_not_repeated_after_a_durable_wait(self):
        task_id = self.start("py-step")
        self.run_worker(email_handler(self.effects), "py-step", "py-step", delivery="durable")
        wait_for("an approval", lambda: self.approve_all(task_id))
        wait_for("completed", lambda: self.task(task_id).state == task_pb2.TASK_STATE_COMPLETED)
        self.assertEqual(self.sent(), 1, "the tool ran once")
        self.assertEqual(self.said(task_id, "working on it"), 1, "the acknowledgement was said once across the durable wait")


class OutageTest(unittest.TestCase):
    def test_a_control_plane_restart_costs_a_running_task_nothing(self):
        cp = controlplane.ControlPlane()
        self.addCleanup(cp.stop)
        c = Client(cp.address)
        self.addCleanup(c.close)
        task_id = c.tasks.start_task(document=AGENT, queue="py-outage", input={"parts": [{"text": "hi"}]}).task.task_id
        leased, down = threading.Event(), threading.Event()

        def handler(task: Task) -> None:
            task.say("before")
            leased.set()
            down.wait()
            task.say("after")  # made while the control plane is away: repeated until it is back
            task.complete(text="done")

        w = Worker(c, handler, "py-outage", queues=["py-outage"], poll_wait=0.2)
        th = threading.Thread(target=w.run, daemon=True)
        th.start()
        self.addCleanup(lambda: (w.stop(), th.join(30)))
        self.assertTrue(leased.wait(30))
        cp.kill()
        down.set()
        time.sleep(4)  # longer than the old budget of four attempts
        cp.start()
        def ended() -> task_pb2.Task | None:
            try:
                t = c.tasks.get_task(task_id=task_id).task
            except AgentplaneError as e:  # this client reconnecting, too
                if e.code == grpc.StatusCode.UNAVAILABLE:
                    return None
                raise
            return t if t.state in (task_pb2.TASK_STATE_COMPLETED, task_pb2.TASK_STATE_FAILED) else None

        t = wait_for("the task's end", ended, timeout=60)
        self.assertEqual(t.state, task_pb2.TASK_STATE_COMPLETED, f"{t.failure}")
        self.assertEqual(t.attempt, 1, "completed on the lease it held")


if __name__ == "__main__":
    unittest.main()
