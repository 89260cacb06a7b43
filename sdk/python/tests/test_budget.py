"""Task.model_call (sync and async) against a real control plane whose one budget (10
tokens a day) has on_limit: approve: allowed while it has room, then each model call
waits for a person; an approval lets it run, a rejection fails the task."""

import asyncio
import threading
import unittest
from collections.abc import Callable
from typing import Any

import controlplane
from agentplane import Client
from agentplane.aio import AsyncClient
from agentplane.async_worker import AsyncTask, AsyncWorker
from agentplane.enums import InterruptKind, TaskState
from agentplane.worker import ModelCallRejected, Task, Worker

AGENT = b"apiVersion: qar/v1\nkind: AgentSpec\nname: py-budget\ninstructions: Answer briefly.\nmodel: m\n"
SPEND = {"message": {"role": "MESSAGE_ROLE_ASSISTANT", "model": "m", "parts": [{"text": "thinking"}],
                     "usage": {"total_tokens": 20}}}

BUDGET = "budgets:\n  rules:\n    - {name: gated, period: day, max_tokens: 10, on_limit: approve}\n"


class ModelCallTest(unittest.TestCase):
    def setUp(self) -> None:
        # A server per test: each spends its budget.
        self.cp = controlplane.ControlPlane(config_yaml=BUDGET)
        self.addCleanup(self.cp.stop)
        self.c = Client(self.cp.address)
        self.addCleanup(self.c.close)

    def decide(self, task_id: str, call_id: str, approve: bool) -> None:
        for _ in range(600):
            for it in self.c.hitl.list_interrupts(task_id=task_id).interrupts:
                if it.call_id == call_id and it.kind == InterruptKind.MODEL_CALL_APPROVAL:
                    self.assertEqual(it.approval.model_call.budget, "gated")
                    if approve:
                        self.c.hitl.resolve_interrupt(interrupt_id=it.interrupt_id, approve={})
                    else:
                        self.c.hitl.resolve_interrupt(interrupt_id=it.interrupt_id, reject={"reason": "no more"})
                    return
            threading.Event().wait(0.05)
        self.fail(f"no model-call approval for {call_id}")

    def check(self, queue: str, run: Callable[[], Callable[[], None]], results: dict[str, Any]) -> None:
        task_id = self.c.tasks.start_task(document=AGENT, queue=queue, input={"parts": [{"text": "hi"}]}).task.task_id
        stop = run()
        try:
            self.decide(task_id, "m2", True)
            self.decide(task_id, "m3", False)
            for _ in range(600):
                if self.c.tasks.get_task(task_id=task_id).task.state == TaskState.FAILED:
                    break
                threading.Event().wait(0.05)
        finally:
            stop()
        task = self.c.tasks.get_task(task_id=task_id).task
        self.assertTrue(results["checks"])
        self.assertIsNone(results["second"])
        self.assertIsInstance(results["third"], ModelCallRejected)
        self.assertEqual(task.state, TaskState.FAILED)
        self.assertEqual(task.failure.reason, "budget.model_call_rejected")

    def test_model_call(self) -> None:
        results: dict[str, Any] = {}

        def handler(task: Task) -> None:
            results["checks"] = task.lease.check_model_calls
            task.model_call("m1", model="m")
            task.report(SPEND)
            results["second"] = task.model_call("m2", model="m")
            try:
                task.model_call("m3", model="m")
            except ModelCallRejected as e:
                results["third"] = e
                raise

        def run() -> Callable[[], None]:
            w = Worker(self.c, handler, "py-budget", queues=["py-budget"], poll_wait=0.2)
            t = threading.Thread(target=w.run, daemon=True)
            t.start()

            def stop() -> None:
                w.stop()
                t.join(30)
            return stop

        self.check("py-budget", run, results)

    def test_async_model_call(self) -> None:
        results: dict[str, Any] = {}

        async def handler(task: AsyncTask) -> None:
            results["checks"] = task.lease.check_model_calls
            await task.model_call("m1", model="m")
            await task.report(SPEND)
            results["second"] = await task.model_call("m2", model="m")
            try:
                await task.model_call("m3", model="m")
            except ModelCallRejected as e:
                results["third"] = e
                raise

        def run() -> Callable[[], None]:
            loop = asyncio.new_event_loop()
            ready = threading.Event()
            holder: dict[str, Any] = {}

            async def main() -> None:
                async with AsyncClient(self.cp.address) as c:
                    w = AsyncWorker(c, handler, "py-budget-async", queues=["py-budget-async"], poll_wait=0.2)
                    holder["w"] = w
                    ready.set()
                    await w.run()

            t = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
            t.start()
            ready.wait(30)

            def stop() -> None:
                asyncio.run_coroutine_threadsafe(holder["w"].stop(), loop).result(30)
                t.join(30)
            return stop

        self.check("py-budget-async", run, results)


if __name__ == "__main__":
    unittest.main()
