"""The task handle and the decision helpers (agentplane.task, and AsyncClient's) against a
real control plane, with a Worker as the runtime. The regions between "snippet:" and
"end snippet" are in docs/clients.md verbatim (TestDocSnippets in client/ checks it)."""

import threading
import unittest
from typing import Any

import controlplane
from agentplane import AgentplaneError, Client, from_value, new_request_id
from agentplane.aio import AsyncClient
from agentplane.v1 import hitl_pb2, task_pb2
from agentplane.worker import Task, Worker

AGENT = b"apiVersion: qar/v1\nkind: AgentSpec\nname: py-helpers\ninstructions: Answer briefly.\nmodel: m\n"
QUEUE = "py-helpers"
S = task_pb2.TaskState

cp: controlplane.ControlPlane  # set by setUpModule
worker: Worker | None = None


def runtime(task: Task) -> None:
    """By its input: a gated call of send_email, a chat pause, or a client tool's output."""
    if task.input_text == "chat":
        if task.continue_messages:
            said = "".join(p.text for p in task.continue_messages[-1].parts)
            return task.complete(text=f"you said {said}")
        task.pause("what next?", "py-helpers")
        return
    if task.input_text == "weather":
        if task.continue_tool_results:
            return task.complete(text=f"weather {from_value(task.continue_tool_results[0].result)}")
        gate = task.tool_call("w1", "get_weather", '{"city":"Oslo"}', node="py-helpers")
        task.wait_for_tool_outputs("py-helpers", gate)
        return
    gate = task.tool_call("c1", "send_email", '{"to":"ada@example.com"}', node="py-helpers")
    if not gate.allowed:
        return task.complete(text="not sent")
    task.tool_result("c1", "send_email", True, node="py-helpers")
    task.complete(text=f"sent {gate.arguments_json}")


def setUpModule() -> None:
    global cp, worker
    cp = controlplane.ControlPlane()
    c = Client(cp.address)
    worker = Worker(c, runtime, "py-helpers", queues=[QUEUE], poll_wait=0.2)
    threading.Thread(target=worker.run, daemon=True).start()


def tearDownModule() -> None:
    if worker:
        worker.stop()
    if "cp" in globals():
        cp.stop()


def text(task: task_pb2.Task) -> str:
    return "".join(p.text for p in task.output.message.parts)


class HelpersTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(cp.address)
        self.addCleanup(self.c.close)

    def output(self, task: task_pb2.Task, want: str) -> None:
        self.assertEqual(S.Name(task.state), "TASK_STATE_COMPLETED", task.failure)
        self.assertEqual(text(task), want)

    def test_approve_reject_edit(self):
        c = self.c
        want = {"approve": 'sent {"to":"ada@example.com"}', "reject": "not sent", "edit": 'sent {"to":"grace@example.com"}'}
        for decide in ("approve", "reject", "edit"):
            with self.subTest(decide):
                # snippet: py-approve
                h = c.start(
                    queue=QUEUE, document=AGENT, input={"parts": [{"text": "send it"}]},
                    # Every call of send_email waits for a person.
                    interrupt_policy={"allowlist": {"tools": ["send_email"]}},
                )
                h.wait(until_input_required=True)  # INPUT_REQUIRED: a call waits
                (pending,) = h.interrupts()
                if decide == "approve":
                    c.approve(pending.interrupt_id, reason="looks right")
                elif decide == "reject":
                    c.reject(pending.interrupt_id, "wrong recipient")
                else:
                    c.edit(pending.interrupt_id, {"to": "grace@example.com"})
                task = h.wait()  # COMPLETED
                # end snippet
                self.output(task, want[decide])

    def test_digest_and_retry(self):
        h = self.c.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "send it"}]},
                         interrupt_policy={"allowlist": {"tools": ["send_email"]}})
        assert h.started is not None
        self.assertEqual(h.started.task.task_id, h.id)
        h.wait(until_input_required=True)
        (pending,) = self.c.task(h.id).interrupts()
        self.assertTrue(pending.args_digest)
        with self.assertRaises(AgentplaneError) as e:
            self.c.approve(pending.interrupt_id, args_digest="0000")
        self.assertEqual(e.exception.reason, "INTERRUPT_ARGS_MISMATCH")
        # What the helper sends: the digest it read, and a request id.
        sent: list[dict[str, Any]] = []

        def record(**fields: Any) -> None:
            sent.append(fields)
            raise RuntimeError("recorded, not sent")

        spy = Client(cp.address)
        self.addCleanup(spy.close)
        setattr(spy.hitl, "resolve_interrupt", record)
        with self.assertRaises(RuntimeError):
            spy.approve(pending.interrupt_id)
        self.assertEqual(len(sent), 1)
        self.assertEqual(sent[0]["args_digest"], pending.args_digest)
        self.assertTrue(sent[0]["request_id"])
        rid = new_request_id()
        first = self.c.reject(pending.interrupt_id, "no", request_id=rid)
        again = self.c.reject(pending.interrupt_id, "no", request_id=rid)
        self.assertEqual(again.interrupt_id, first.interrupt_id)
        self.assertEqual(again.state, hitl_pb2.INTERRUPT_STATE_RESOLVED)
        with self.assertRaises(AgentplaneError) as e:
            self.c.reject(pending.interrupt_id, "no")
        self.assertEqual(e.exception.reason, "INTERRUPT_ALREADY_RESOLVED")
        with self.assertRaises(ValueError):
            self.c.reject(pending.interrupt_id, "")
        self.output(self.c.task(h.id).wait(), "not sent")

    def test_continue_and_cancel(self):
        c = self.c
        # snippet: py-continue
        chat = c.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "chat"}]})
        chat.wait(until_input_required=True)  # the runtime paused for a turn
        chat.continue_("hello")  # `continue` is a keyword: continue_
        answered = chat.wait()
        # end snippet
        self.output(answered, "you said hello")
        # The watch replays the task's earlier INPUT_REQUIRED; wait answers the state it is in.
        self.output(c.task(chat.id).wait(until_input_required=True), "you said hello")

        # snippet: py-tool-outputs
        weather = c.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "weather"}]})
        weather.wait(until_input_required=True)  # waits for get_weather's output
        weather.continue_tool_outputs([{"call_id": "w1", "result": "21C, clear"}])
        reported = weather.wait()
        # end snippet
        self.output(reported, "weather 21C, clear")

        stuck = c.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "chat"}]})
        stuck.wait(until_input_required=True)
        got: list[task_pb2.Task] = []
        waiter = threading.Thread(target=lambda: got.append(stuck.wait()))
        waiter.start()
        c.task(stuck.id).cancel("no answer")
        waiter.join(30)
        self.assertEqual(S.Name(got[0].state), "TASK_STATE_CANCELED")


class AsyncHelpersTest(unittest.IsolatedAsyncioTestCase):
    async def test_async(self):
        async with AsyncClient(cp.address) as ac:
            # snippet: py-async
            h = await ac.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "send it"}]},
                               interrupt_policy={"allowlist": {"tools": ["send_email"]}})
            await h.wait(until_input_required=True)
            (pending,) = await h.interrupts()
            await ac.edit(pending.interrupt_id, {"to": "grace@example.com"})
            task = await h.wait()
            # end snippet
            self.assertEqual(text(task), 'sent {"to":"grace@example.com"}')

            h = await ac.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "send it"}]},
                               interrupt_policy={"allowlist": {"tools": ["send_email"]}})
            await h.wait(until_input_required=True)
            (pending,) = await ac.task(h.id).interrupts()
            with self.assertRaises(AgentplaneError) as e:
                await ac.approve(pending.interrupt_id, args_digest="0000")
            self.assertEqual(e.exception.reason, "INTERRUPT_ARGS_MISMATCH")
            await ac.reject(pending.interrupt_id, "no")
            self.assertEqual(text(await h.wait()), "not sent")

            chat = await ac.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "chat"}]})
            await chat.wait(until_input_required=True)
            await chat.continue_("hi")
            self.assertEqual(text(await chat.wait()), "you said hi")
            self.assertEqual(text(await ac.task(chat.id).wait(until_input_required=True)), "you said hi")

            weather = await ac.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "weather"}]})
            await weather.wait(until_input_required=True)
            await weather.continue_tool_outputs([{"call_id": "w1", "result": "sunny"}])
            self.assertEqual(text(await weather.wait()), "weather sunny")

            stuck = await ac.start(queue=QUEUE, document=AGENT, input={"parts": [{"text": "chat"}]})
            await stuck.wait(until_input_required=True)
            self.assertEqual(S.Name((await ac.task(stuck.id).cancel("no")).state), "TASK_STATE_CANCELED")
            self.assertEqual(S.Name((await stuck.wait()).state), "TASK_STATE_CANCELED")


if __name__ == "__main__":
    unittest.main()
