"""The Python SDK against a real control plane (tests/controlplane.py)."""

import asyncio
import datetime
import threading
import time
import unittest
from typing import Any, Iterator

import grpc

import controlplane  # noqa: F401  (puts ../src on sys.path)
from agentplane import AgentplaneError, Client, Variant, enum_of, from_struct, from_value, py, variant
from agentplane.client import KEEPALIVE_OPTIONS, channel_args
from agentplane.enums import DecisionType, TaskState
from agentplane import _rpc
from agentplane.aio import AsyncClient
from agentplane.v1 import runtime_service_pb2, task_pb2, task_service_pb2

AGENT = b"apiVersion: qar/v1\nkind: AgentSpec\nname: py-sdk\ninstructions: Answer briefly.\nmodel: m\n"

cp: controlplane.ControlPlane  # set by setUpModule


def setUpModule() -> None:
    global cp
    cp = controlplane.ControlPlane()


def tearDownModule() -> None:
    if "cp" in globals():
        cp.stop()


def start(c: Client, **kw: Any) -> task_pb2.Task:
    return c.tasks.start_task(document=AGENT, input={"parts": [{"text": "hi"}]}, **kw).task


def lease(c: Client, task_id: str, runtime_id: str = "py-rt") -> runtime_service_pb2.Lease:
    """Leases the given task (tasks of other tests may be queued too: those are failed)."""
    for _ in range(50):
        for l in c.runtime.lease_tasks(runtime_id=runtime_id, max_tasks=8, wait=0.5).leases:
            if l.task.task_id == task_id:
                return l
            c.runtime.fail_task(lease=ref(l), error={"message": "not this test's task"})
    raise AssertionError(f"task {task_id} was never leased")


def ref(l: runtime_service_pb2.Lease) -> dict[str, Any]:
    return {"task_id": l.task.task_id, "lease_id": l.lease_id, "epoch": l.epoch}


def note(text: str) -> dict[str, Any]:
    return {"note": {"text": text}}


class ServicesTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(cp.address)
        self.addCleanup(self.c.close)

    def test_capabilities_and_admin(self):
        caps = self.c.capabilities.get_capabilities()
        self.assertIn("qar/v1", caps.capabilities.spec.api_versions)
        stats = self.c.admin.get_stats()
        self.assertEqual(stats.store, "bbolt")
        self.assertEqual(self.c.admin.purge_tasks(older_than=3600, dry_run=True).tasks, 0)
        chunks = list(self.c.admin.backup())
        self.assertGreater(sum(len(x.chunk) for x in chunks), 0)

    def test_specs(self):
        self.assertTrue(self.c.specs.validate_spec(document=AGENT).valid)
        bad = self.c.specs.validate_spec(spec={"apiVersion": "qar/v1", "kind": "AgentSpec", "name": "x"})
        self.assertFalse(bad.valid)
        rules = self.c.specs.list_rules(page_size=5).rules
        self.assertTrue(rules)
        self.assertEqual(self.c.specs.get_rule(rule_id=rules[0].rule_id).rule.rule_id, rules[0].rule_id)
        self.assertTrue(self.c.specs.get_spec_schema().ListFields())

    def test_tasks_and_request_ids(self):
        t = start(self.c, labels={"sdk": "py"})
        self.assertTrue(t.request_id, "StartTask got no generated request id")
        self.assertEqual(self.c.tasks.get_task(task_id=t.task_id).task.task_id, t.task_id)
        listed = self.c.tasks.list_tasks(label_selector=["sdk=py"]).tasks
        self.assertIn(t.task_id, [x.task_id for x in listed])
        # The same request id and request is an idempotent retry.
        again = self.c.tasks.start_task(request_id=t.request_id, document=AGENT, input={"parts": [{"text": "hi"}]},
                                        labels={"sdk": "py"})
        self.assertFalse(again.created)
        self.assertEqual(again.task.task_id, t.task_id)
        with self.assertRaises(AgentplaneError) as cm:
            self.c.tasks.start_task(request_id=t.request_id, document=AGENT, input={"parts": [{"text": "other"}]})
        self.assertEqual(cm.exception.code, grpc.StatusCode.ALREADY_EXISTS)
        self.assertEqual(cm.exception.reason, "TASK_REQUEST_ID_REUSED")
        self.assertEqual(len(self.c.tasks.list_task_events(task_id=t.task_id).events), 1)
        self.assertEqual(len(self.c.tasks.list_verdicts(task_id=t.task_id).verdicts), 0)
        self.c.tasks.list_obligations(task_id=t.task_id)
        canceled = self.c.tasks.cancel_task(task_id=t.task_id, reason="test").task
        self.assertEqual(canceled.state, task_pb2.TASK_STATE_CANCELED)
        with self.assertRaises(AgentplaneError) as cm:
            self.c.tasks.continue_task(task_id=t.task_id, message={"parts": [{"text": "more"}]})
        self.assertEqual(cm.exception.code, grpc.StatusCode.FAILED_PRECONDITION)

    def test_reused_request_is_a_new_call(self):
        # As in Go: a request without a request_id is sent with a fresh one on a copy, so
        # sending the same object twice starts two tasks and leaves the object unchanged.
        req = task_service_pb2.StartTaskRequest(document=AGENT, labels={"sdk": "py-reuse"})
        before = req.SerializeToString(deterministic=True)
        first, second = self.c.tasks.start_task(req), self.c.tasks.start_task(req)
        self.assertEqual(req.SerializeToString(deterministic=True), before, "the caller's request was modified")
        self.assertTrue(first.created and second.created)
        self.assertNotEqual(first.task.task_id, second.task.task_id)
        self.assertNotEqual(first.task.request_id, second.task.request_id)
        for t in (first.task, second.task):
            self.c.tasks.cancel_task(task_id=t.task_id, reason="test")

    async def reuse_async(self):
        req = task_service_pb2.StartTaskRequest(document=AGENT, labels={"sdk": "py-reuse"})
        async with AsyncClient(cp.address) as ac:
            first, second = await ac.tasks.start_task(req), await ac.tasks.start_task(req)
            for t in (first.task, second.task):
                await ac.tasks.cancel_task(task_id=t.task_id, reason="test")
        return req, first, second

    def test_reused_request_is_a_new_call_async(self):
        req, first, second = asyncio.run(self.reuse_async())
        self.assertEqual(req.request_id, "", "the caller's request was modified")
        self.assertNotEqual(first.task.task_id, second.task.task_id)

    def test_runtime_and_watch(self):
        t = start(self.c)
        l = lease(self.c, t.task_id)
        self.assertFalse(self.c.runtime.heartbeat(lease=ref(l)).canceled)
        self.c.runtime.report_events(lease=ref(l), events=[note("one"), note("two")])
        self.c.runtime.publish_deltas(lease=ref(l))
        self.assertGreater(len(self.c.runtime.read_task_history(lease=ref(l)).events), 0)
        self.c.runtime.complete_task(lease=ref(l), output={"structured": {"answer": 42, "ok": True}})
        got = list(self.c.watch(t.task_id))
        events = [m.event for m in got if m.WhichOneof("kind") == "event"]
        self.assertEqual([e.sequence for e in events], list(range(1, len(events) + 1)))
        self.assertIn("two", [e.note.text for e in events])
        final = self.c.tasks.get_task(task_id=t.task_id).task
        self.assertEqual(final.state, task_pb2.TASK_STATE_COMPLETED)
        self.assertEqual(from_value(final.output.structured), {"answer": 42.0, "ok": True})

    def test_hitl(self):
        self.c.hitl.list_interrupts()
        with self.assertRaises(AgentplaneError) as cm:
            self.c.hitl.get_interrupt(interrupt_id="nope")
        self.assertIn(cm.exception.code, (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT))
        self.assertTrue(cm.exception.reason)
        with self.assertRaises(AgentplaneError) as cm:
            self.c.hitl.resolve_interrupt(interrupt_id="nope", approve={})
        self.assertTrue(cm.exception.reason)


class ErrorTest(unittest.TestCase):
    def setUp(self):
        self.c = Client(cp.address)
        self.addCleanup(self.c.close)

    def test_spec_violations(self):
        with self.assertRaises(AgentplaneError) as cm:
            self.c.tasks.start_task(spec={"apiVersion": "qar/v1", "kind": "AgentSpec", "name": "x"})
        e = cm.exception
        self.assertEqual(e.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(e.reason, "SPEC_INVALID")
        self.assertEqual(e.domain, "agentplane.dev")
        self.assertIn("/instructions", [v.path for v in e.spec_violations])

    def test_field_violations(self):
        with self.assertRaises(AgentplaneError) as cm:
            start(self.c, interrupt_policy={"allowlist": {"tools": [""]}})
        e = cm.exception
        self.assertEqual(e.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertTrue(e.reason)
        self.assertIn("interrupt_policy.allowlist.tools[0]", [v.field for v in e.field_violations])

    def test_metadata_and_not_found(self):
        with self.assertRaises(AgentplaneError) as cm:
            self.c.tasks.get_task(task_id="missing")
        self.assertEqual(cm.exception.code, grpc.StatusCode.NOT_FOUND)
        self.assertTrue(cm.exception.reason)

    def test_retry_info_and_unknown_details(self):
        # RetryInfo only comes with overload; decode a trailer built like the server's.
        st = _rpc.Status(code=grpc.StatusCode.UNAVAILABLE.value[0], message="busy")
        for m in (_rpc.ErrorInfo(reason="server.overloaded", domain="agentplane.dev", metadata={"k": "v"}),
                  _rpc.RetryInfo(retry_delay={"seconds": 1, "nanos": 500000000}),
                  task_pb2.RuntimeNote(text="unknown to the decoder")):
            st.details.add(type_url="type.googleapis.com/" + m.DESCRIPTOR.full_name, value=m.SerializeToString())

        class FakeError(grpc.RpcError):
            def code(self) -> grpc.StatusCode:
                return grpc.StatusCode.UNAVAILABLE

            def details(self) -> str:
                return "busy"

            def trailing_metadata(self) -> Any:
                return (("grpc-status-details-bin", st.SerializeToString()),)

        e = AgentplaneError.from_rpc_error(FakeError())
        self.assertEqual((e.reason, e.metadata, e.retry_delay), ("server.overloaded", {"k": "v"}, 1.5))
        self.assertEqual(len(e.details), 3)


def assert_once_in_order(test: unittest.TestCase, seen: list[task_service_pb2.WatchTaskResponse]) -> None:
    """Every event of the watch once, in order, the notes before and after the restart included."""
    seqs = [m.event.sequence for m in seen if m.WhichOneof("kind") == "event"]
    test.assertEqual(seqs, list(range(1, len(seqs) + 1)), "a gap or a duplicate across the restart")
    texts = [m.event.note.text for m in seen if m.WhichOneof("kind") == "event" and m.event.note.text]
    test.assertEqual(texts, [f"before {i}" for i in range(3)] + [f"after {i}" for i in range(3)])


def watch_to_before_2(c: Client) -> tuple[task_pb2.Task, runtime_service_pb2.Lease,
                                         Iterator[task_service_pb2.WatchTaskResponse],
                                         list[task_service_pb2.WatchTaskResponse]]:
    """Starts and leases a task, reports the notes "before 0" to "before 2" and watches it up to
    the last of them; returns the task, its lease, the watch and what it delivered."""
    t = start(c)
    l = lease(c, t.task_id)
    c.runtime.report_events(lease=ref(l), events=[note(f"before {i}") for i in range(3)])
    it = c.watch(t.task_id)
    seen: list[task_service_pb2.WatchTaskResponse] = []
    while not any(m.WhichOneof("kind") == "event" and m.event.note.text == "before 2" for m in seen):
        seen.append(next(it))
    return t, l, it, seen


class WatchResumeTest(unittest.TestCase):
    def test_resume_across_server_restart(self):
        c = Client(cp.address)
        self.addCleanup(c.close)
        t, l, it, seen = watch_to_before_2(c)
        cp.restart()  # SIGKILL mid-stream, then the same port and data
        c.runtime.report_events(lease=ref(l), events=[note(f"after {i}") for i in range(3)])
        c.runtime.complete_task(lease=ref(l), output={"structured": "done"})
        seen.extend(it)
        assert_once_in_order(self, seen)
        self.assertEqual(c.tasks.get_task(task_id=t.task_id).task.state, task_pb2.TASK_STATE_COMPLETED)

    def test_resume_across_an_outage(self):
        """A server away for 6 s, then back on the same port and data, costs the watch nothing,
        though the channel backs off reconnecting meanwhile (1 s, growing 1.6 times, jittered)
        and fails every reopening at once until it tries again, seconds after the server is
        back: counted alone, the 10 reopenings (their pauses 6.5 to 13.1 s in all) could be used
        up before it; the 20 s budget lasts."""
        cp2 = controlplane.ControlPlane()
        self.addCleanup(cp2.stop)
        c = Client(cp2.address)  # gRPC's default reconnect backoff
        self.addCleanup(c.close)
        _, l, it, seen = watch_to_before_2(c)
        cp2.kill()
        errors: list[BaseException] = []

        def outage() -> None:
            try:
                time.sleep(6)  # the outage, while the watch below reopens
                cp2.start()
                # A subchannel of its own: gRPC shares them between a process's channels, and c's backs off.
                with Client(cp2.address, options=[("grpc.use_local_subchannel_pool", 1)]) as rt:
                    rt.runtime.report_events(lease=ref(l), events=[note(f"after {i}") for i in range(3)])
                    rt.runtime.complete_task(lease=ref(l), output={"structured": "done"})
            except BaseException as e:
                errors.append(e)
                raise

        th = threading.Thread(target=outage)
        th.start()
        try:
            seen.extend(it)
        finally:
            th.join(60)
        self.assertEqual(errors, [])
        assert_once_in_order(self, seen)


class AsyncWatchResumeTest(unittest.IsolatedAsyncioTestCase):
    async def test_async_resume_across_server_restart(self):
        sync = Client(cp.address)
        self.addCleanup(sync.close)
        t = start(sync)
        l = lease(sync, t.task_id)
        sync.runtime.report_events(lease=ref(l), events=[note(f"before {i}") for i in range(3)])
        c = AsyncClient(cp.address)
        self.addAsyncCleanup(c.close)
        self.assertEqual((await c.tasks.get_task(task_id=t.task_id)).task.task_id, t.task_id)
        seen: list[task_service_pb2.WatchTaskResponse] = []
        restarted = False
        async for m in c.watch(t.task_id):
            seen.append(m)
            if not restarted and m.WhichOneof("kind") == "event" and m.event.note.text == "before 2":
                restarted = True
                await asyncio.to_thread(cp.restart)  # SIGKILL mid-stream, then the same port and data
                sync.runtime.report_events(lease=ref(l), events=[note(f"after {i}") for i in range(3)])
                sync.runtime.complete_task(lease=ref(l), output={"structured": "done"})
        self.assertTrue(restarted)
        assert_once_in_order(self, seen)
        with self.assertRaises(AgentplaneError) as cm:
            async for _ in c.watch("no-such-task"):
                pass
        self.assertEqual(cm.exception.reason, "TASK_NOT_FOUND")


class ResultsTest(unittest.TestCase):
    """Results as Python: enum members, oneof variants to match, Struct and Value as plain data."""

    def setUp(self) -> None:
        self.c = Client(cp.address)
        self.addCleanup(self.c.close)

    def test_enums_variants_and_dicts(self) -> None:
        t = start(self.c, labels={"sdk": "py-results"})
        l = lease(self.c, t.task_id)
        self.c.runtime.report_events(lease=ref(l), events=[note("hello")])
        self.c.runtime.complete_task(lease=ref(l), output={"structured": {"answer": 42, "tags": ["a", None]}})
        task = self.c.tasks.get_task(task_id=t.task_id).task

        state = enum_of(task, "state")
        self.assertIs(state, TaskState.COMPLETED)
        self.assertIsInstance(state, TaskState)
        self.assertEqual(state, task_pb2.TASK_STATE_COMPLETED, "a member equals the generated int")
        self.assertEqual(py(task, "labels"), {"sdk": "py-results"})
        self.assertEqual(py(task.output, "structured"), {"answer": 42.0, "tags": ["a", None]})
        self.assertIsNone(py(task, "failure"), "an unset message field is None")
        self.assertIsInstance(py(task, "create_time"), datetime.datetime)

        kinds: list[str] = []
        moved: list[TaskState] = []
        for m in self.c.watch(t.task_id):
            match variant(m, "kind"):
                case Variant("event", task_pb2.TaskEvent() as ev):
                    match variant(ev, "payload"):
                        case Variant("state_changed", task_pb2.StateChanged(to_state=to)):
                            moved.append(TaskState(to))
                        case Variant("note", task_pb2.RuntimeNote(text=text)):
                            kinds.append("note " + text)
                        case Variant(name, _):
                            kinds.append(name)
                        case None:
                            self.fail("an event without a payload")
                case Variant(name, _):
                    kinds.append(name)
                case None:
                    self.fail("a watch response without a kind")
        self.assertIn("note hello", kinds)
        self.assertEqual(kinds[0], "submitted")
        self.assertEqual(moved[-1], TaskState.COMPLETED)
        self.assertIn(TaskState.WORKING, moved)
        self.assertIsNone(variant(task_pb2.TaskEvent(), "payload"))

    def test_enum_of_an_unknown_number_and_a_non_enum(self) -> None:
        newer = task_pb2.Task()
        setattr(newer, "state", 99)  # a value of a newer server: the int
        self.assertEqual(enum_of(newer, "state"), 99)
        with self.assertRaises(TypeError):
            enum_of(task_pb2.Task(), "task_id")
        self.assertIs(TaskState(task_pb2.TASK_STATE_FAILED), TaskState.FAILED)
        self.assertEqual(DecisionType.APPROVE.name, "APPROVE")


class ChannelTest(unittest.TestCase):
    def test_keepalive_by_default_and_the_callers_options_replace_it(self) -> None:
        _, opts, _ = channel_args("127.0.0.1:1", None, None, None, False)
        self.assertEqual(dict(opts), dict(KEEPALIVE_OPTIONS))
        self.assertGreaterEqual(dict(opts)["grpc.keepalive_time_ms"], 10_000, "below the server's enforcement minimum")
        _, opts, _ = channel_args("127.0.0.1:1", None, None, [("grpc.keepalive_time_ms", 60_000), ("x", 1)], False)
        self.assertEqual([v for k, v in opts if k == "grpc.keepalive_time_ms"], [60_000])
        self.assertIn(("x", 1), opts)
        self.assertIn(("grpc.keepalive_timeout_ms", 10_000), opts)


class ConvertTest(unittest.TestCase):
    def test_struct_round_trip(self):
        from agentplane.v1 import task_service_pb2
        from agentplane._convert import fill
        req = fill(task_service_pb2.StartTaskRequest(), {"spec": {"a": [1, {"b": None}, "s", True]}})
        self.assertEqual(from_struct(req.spec), {"a": [1.0, {"b": None}, "s", True]})


if __name__ == "__main__":
    unittest.main()
