"""The asyncio worker (agentplane.async_worker) against a real control plane: an approval
on the default 20 s long poll, a cancel and a lost lease that cancel the handler's
asyncio task mid-await, a failing handler, a durable suspend and resume, a step that
runs once across leases, and `async with` draining then handing the task back."""

import asyncio
import unittest
from typing import Any

import grpc

import controlplane
from agentplane import AgentplaneError, StopReason, from_value
from agentplane.aio import AsyncClient
from agentplane.async_worker import AsyncTask, AsyncWorker, Failure
from agentplane.enums import TaskState
from agentplane.v1 import hitl_pb2, task_pb2

AGENT = b"apiVersion: qar/v1\nkind: AgentSpec\nname: py-worker\ninstructions: Answer briefly.\nmodel: m\n"
GATED = {"allowlist": {"tools": ["delete_file"]}}

cp: controlplane.ControlPlane | None = None


def setUpModule() -> None:
    global cp
    # A short lease, so that a lost lease is noticed by the next heartbeat within a second.
    cp = controlplane.ControlPlane(config_yaml="tasks:\n  lease_ttl: 2s\n")


def tearDownModule() -> None:
    if cp:
        cp.stop()


def server() -> controlplane.ControlPlane:
    assert cp is not None
    return cp


class AsyncWorkerTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.c = AsyncClient(server().address)
        # A cleanup, not asyncTearDown (which runs before every cleanup): cleanups run last
        # in first out, so a worker's stop (registered later) comes before the close of the
        # channel it calls on; closed first, its calls in flight are cancelled and its next
        # ones fail (UsageError) in whatever it was doing.
        self.addAsyncCleanup(self.c.close)

    async def wait_for(self, what: str, pred: Any, timeout: float = 30.0) -> Any:
        for _ in range(int(timeout / 0.05)):
            v = await pred()
            if v:
                return v
            await asyncio.sleep(0.05)
        raise AssertionError(f"not within {timeout} s: {what}")

    async def state(self, task_id: str) -> TaskState:
        return TaskState((await self.c.tasks.get_task(task_id=task_id)).task.state)

    async def in_state(self, task_id: str, state: TaskState) -> bool:
        return await self.state(task_id) == state

    async def pending_interrupt(self, task_id: str) -> hitl_pb2.Interrupt | None:
        its = [i for i in (await self.c.hitl.list_interrupts()).interrupts if i.task_id == task_id]
        return its[0] if its else None

    async def start(self, queue: str, gated: bool = False) -> task_pb2.Task:
        fields: dict[str, Any] = {"document": AGENT, "queue": queue, "input": {"parts": [{"text": "clean up"}]}}
        if gated:
            fields["interrupt_policy"] = GATED
        return (await self.c.tasks.start_task(**fields)).task

    def worker(self, handler: Any, queue: str, **kw: Any) -> AsyncWorker:
        w = AsyncWorker(self.c, handler, queue, queues=[queue], **kw)
        runner = asyncio.create_task(w.run())

        async def stop() -> None:
            await w.stop()
            await asyncio.wait_for(runner, 30)

        self.addAsyncCleanup(stop)
        return w

    async def test_interactive_approval_on_the_default_long_poll(self) -> None:
        runs: list[str] = []

        async def agent(task: AsyncTask) -> None:
            runs.append(task.task_id)
            await task.say("working on " + task.input_text)
            gate = await task.tool_call("c1", "delete_file", '{"path": "/tmp/x"}')
            self.assertTrue(gate.allowed, gate.reason)
            await task.tool_result("c1", "delete_file", {"deleted": True})
            await task.complete(output={"structured": {"ran": gate.arguments_json}})

        w = AsyncWorker(self.c, agent, "py-async-approve", queues=["py-async-approve"])
        self.assertEqual(w.poll_wait, 20.0)
        runner = asyncio.create_task(w.run())
        # The worker is in its long poll when the task is started.
        await self.wait_for("the long poll", self.async_true(lambda: w._poll is not None))  # pyright: ignore[reportPrivateUsage]
        t = await self.start("py-async-approve", gated=True)
        it = await self.wait_for("an interrupt", lambda: self.pending_interrupt(t.task_id))
        await self.c.approve(it.interrupt_id)
        await self.wait_for("completed", lambda: self.in_state(t.task_id, TaskState.COMPLETED))
        out = (await self.c.tasks.get_task(task_id=t.task_id)).task.output
        self.assertEqual(from_value(out.structured), {"ran": '{"path": "/tmp/x"}'})
        self.assertEqual(runs, [t.task_id])
        # stop() cuts the 20 s long poll short: run() returns well within it.
        self.assertTrue(await asyncio.wait_for(w.stop(), 10))
        await asyncio.wait_for(runner, 10)

    async def test_cancel_cancels_the_handler(self) -> None:
        seen: list[str] = []
        running = asyncio.Event()

        async def handler(task: AsyncTask) -> None:
            await task.say("long job")
            running.set()
            try:
                await asyncio.sleep(60)
                seen.append("slept")
            except asyncio.CancelledError:
                seen.append("cancelled: " + task.stop_reason)
                raise

        self.worker(handler, "py-async-cancel", poll_wait=1)
        t = await self.start("py-async-cancel")
        await asyncio.wait_for(running.wait(), 30)
        await self.c.tasks.cancel_task(task_id=t.task_id, reason="user")
        await self.wait_for("the handler cancelled", self.async_true(lambda: bool(seen)))
        self.assertEqual(seen, ["cancelled: canceled"])
        self.assertEqual(await self.state(t.task_id), TaskState.CANCELED)

    async def test_lease_lost_mid_handler(self) -> None:
        seen: list[str] = []

        async def handler(task: AsyncTask) -> None:
            if seen:
                seen.append(f"attempt {task.attempt}")
                await task.complete(text="done")
                return
            # Someone else ends this lease behind the worker's back (handed back for a retry)
            # while the handler awaits: the next heartbeat finds the lease lost.
            await self.c.runtime.fail_task(lease=task.ref, reason="test.handback", message="taken away", retry=True)
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append("cancelled: " + task.stop_reason)
                raise

        self.worker(handler, "py-async-lost", poll_wait=1)
        t = await self.start("py-async-lost")
        await self.wait_for("completed", lambda: self.in_state(t.task_id, TaskState.COMPLETED))
        self.assertEqual(seen, [f"cancelled: {StopReason.LEASE_LOST}", "attempt 2"])

    async def test_handler_exception_and_failure(self) -> None:
        attempts: list[int] = []

        async def handler(task: AsyncTask) -> None:
            attempts.append(task.attempt)
            if task.attempt == 1:
                raise Failure("test.flaky", "try again", retry=True)
            raise ValueError("boom")

        self.worker(handler, "py-async-fail", poll_wait=1)
        t = await self.start("py-async-fail")
        await self.wait_for("failed", lambda: self.in_state(t.task_id, TaskState.FAILED))
        self.assertEqual(attempts, [1, 2])
        self.assertIn("boom", (await self.c.tasks.get_task(task_id=t.task_id)).task.failure.message)

    async def test_durable_suspend_resume_and_step(self) -> None:
        runs: list[int] = []
        effects: list[str] = []

        async def side_effect() -> str:
            effects.append("sent")
            return "receipt-1"

        async def handler(task: AsyncTask) -> None:
            runs.append(task.attempt)
            receipt = await task.step("notify", side_effect)
            gate = await task.tool_call("c1", "delete_file", '{"path": "/tmp/x"}')  # suspends the first time
            self.assertTrue(gate.allowed, gate.reason)
            await task.tool_result("c1", "delete_file", {"deleted": True})
            await task.complete(text=f"{receipt} done")

        self.worker(handler, "py-async-durable", poll_wait=1, delivery="durable")
        t = await self.start("py-async-durable", gated=True)
        it = await self.wait_for("an interrupt", lambda: self.pending_interrupt(t.task_id))
        await self.wait_for("suspended", self.async_true(lambda: len(runs) == 1))
        await self.wait_for("the lease given up", lambda: self.in_state(t.task_id, TaskState.INPUT_REQUIRED))
        await self.c.approve(it.interrupt_id)
        await self.wait_for("completed", lambda: self.in_state(t.task_id, TaskState.COMPLETED))
        self.assertEqual(len(runs), 2, "the handler did not run again on the resumed lease")
        self.assertEqual(effects, ["sent"], "the step ran again on the second lease")

    async def test_async_with_drains_then_hands_back(self) -> None:
        seen: list[str] = []
        running = asyncio.Event()

        async def handler(task: AsyncTask) -> None:
            running.set()
            try:
                await asyncio.Event().wait()
            finally:
                seen.append(task.stop_reason)

        async with AsyncWorker(self.c, handler, "py-async-drain", queues=["py-async-drain"], drain_timeout=0.2):
            t = await self.start("py-async-drain")
            await asyncio.wait_for(running.wait(), 30)
        self.assertEqual(seen, ["stopping"])
        self.assertEqual(await self.state(t.task_id), TaskState.SUBMITTED, "not handed back to the queue")

    async def test_drain_deadline_suspends_an_interactive_wait(self) -> None:
        async def handler(task: AsyncTask) -> None:
            await task.tool_call("c1", "delete_file", '{"path": "/tmp/x"}')  # waits on AwaitDecision

        # The interrupt is listed once CheckToolCall has created it, which may be before the
        # handler has its answer: stop only once the handler waits on AwaitDecision.
        waiting = asyncio.Event()
        await_decision = self.c.runtime.await_decision

        def spy(**fields: Any) -> Any:
            waiting.set()
            return await_decision(**fields)

        setattr(self.c.runtime, "await_decision", spy)
        w = self.worker(handler, "py-async-wait", poll_wait=1)
        t = await self.start("py-async-wait", gated=True)
        await asyncio.wait_for(waiting.wait(), 30)
        self.assertFalse(await w.stop(timeout=0.2))
        # Suspended (waiting for its decision without a lease), not returned to the queue.
        self.assertEqual(await self.state(t.task_id), TaskState.INPUT_REQUIRED)
        self.assertEqual((await self.c.tasks.get_task(task_id=t.task_id)).task.attempt, 1)

    async def test_a_permanent_lease_error_is_raised(self) -> None:
        token, entry = controlplane.new_token("acme", "user")  # a user, not a runtime
        cp2 = controlplane.ControlPlane(config_yaml="auth:\n  require_principal: true\n  tokens:\n" + entry)
        self.addCleanup(cp2.stop)
        async with AsyncClient(cp2.address, token=token) as c:
            async def never(task: AsyncTask) -> None:
                raise AssertionError("leased without the runtime role")

            with self.assertRaises(AgentplaneError) as cm:
                await asyncio.wait_for(AsyncWorker(c, never, "py-async-denied", poll_wait=1).run(), 30)
            self.assertEqual(cm.exception.code, grpc.StatusCode.PERMISSION_DENIED)

    def async_true(self, pred: Any) -> Any:
        async def check() -> bool:
            return bool(pred())

        return check


if __name__ == "__main__":
    unittest.main()
