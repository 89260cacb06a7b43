"""The retry policy (agentplane._retry, generated tables in agentplane._api) in the
sync and the asyncio client, against an in-process gRPC server that fails the first
attempts of a call with UNAVAILABLE. The cross-language scenarios are in
testdata/conformance (sdk/conformance_test.go); these check what they do not: the
asyncio client, the deadline across attempts, a retryable reason."""

import asyncio
import threading
import time
import unittest
from concurrent import futures

from typing import NoReturn, get_args

import grpc

import controlplane  # noqa: F401  # pyright: ignore[reportUnusedImport]  (puts ../src on sys.path)
from agentplane import AgentplaneError, Client, Reason, StopReason, _api, _retry, worker
from agentplane import _rpc
from agentplane.aio import AsyncClient
from agentplane.v1 import capability_service_pb2, task_pb2, task_service_pb2


class Flaky:
    """StartTask and GetCapabilities fail the first `fail` attempts (UNAVAILABLE, or
    `status` details when set); every attempt's request id is recorded."""

    def __init__(self, fail: int, details: bytes | None = None) -> None:
        self.fail = fail
        self.details = details
        self.lock = threading.Lock()
        self.calls: dict[str, list[str]] = {}

    def _attempt(self, name: str, request_id: str, context: grpc.ServicerContext) -> None:
        with self.lock:
            self.calls.setdefault(name, []).append(request_id)
            n = len(self.calls[name])
        if n <= self.fail:
            if self.details is not None:
                context.set_trailing_metadata((("grpc-status-details-bin", self.details),))
            _abort(context)

    def start_task(self, request: task_service_pb2.StartTaskRequest,
                   context: grpc.ServicerContext) -> task_service_pb2.StartTaskResponse:
        self._attempt("StartTask", request.request_id, context)
        return task_service_pb2.StartTaskResponse(task=task_pb2.Task(task_id="t1"), created=True)

    def get_capabilities(self, request: capability_service_pb2.GetCapabilitiesRequest,
                         context: grpc.ServicerContext) -> capability_service_pb2.GetCapabilitiesResponse:
        self._attempt("GetCapabilities", "", context)
        return capability_service_pb2.GetCapabilitiesResponse()

    def serve(self, test: unittest.TestCase) -> str:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler("agentplane.v1.TaskService", {
                "StartTask": grpc.unary_unary_rpc_method_handler(
                    self.start_task, task_service_pb2.StartTaskRequest.FromString,
                    task_service_pb2.StartTaskResponse.SerializeToString)}),
            grpc.method_handlers_generic_handler("agentplane.v1.CapabilityService", {
                "GetCapabilities": grpc.unary_unary_rpc_method_handler(
                    self.get_capabilities, capability_service_pb2.GetCapabilitiesRequest.FromString,
                    capability_service_pb2.GetCapabilitiesResponse.SerializeToString)}),
        ))
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        test.addCleanup(server.stop, None)
        return f"127.0.0.1:{port}"


def _abort(context: grpc.ServicerContext) -> NoReturn:
    context.abort(grpc.StatusCode.UNAVAILABLE, "flaky: this attempt fails")
    raise AssertionError("abort returned")


def status_details(reason: str) -> bytes:
    """A serialized google.rpc.Status carrying an ErrorInfo with reason."""
    info = _rpc.ErrorInfo(reason=reason, domain="agentplane.dev")
    st = _rpc.Status(code=14, message="m")
    d = st.details.add()
    d.type_url = "type.googleapis.com/google.rpc.ErrorInfo"
    d.value = info.SerializeToString()
    return st.SerializeToString()


class RetryTest(unittest.TestCase):
    def test_sync_retries_with_one_request_id(self) -> None:
        f = Flaky(fail=2)
        with Client(f.serve(self)) as c:
            req = task_service_pb2.StartTaskRequest(agent_id="echo")
            self.assertEqual(c.tasks.start_task(req).task.task_id, "t1")
        ids = f.calls["StartTask"]
        self.assertEqual(len(ids), 3)
        self.assertTrue(ids[0] and ids.count(ids[0]) == 3, ids)
        self.assertEqual(req.request_id, "", "the caller's message was modified")

    def test_async_retries_with_one_request_id_up_to_the_cap(self) -> None:
        f = Flaky(fail=100)

        async def go() -> None:
            async with AsyncClient(f.serve(self)) as c:
                with self.assertRaises(AgentplaneError) as e:
                    await c.capabilities.get_capabilities()
                self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)
                f.fail = 1
                await c.tasks.start_task(agent_id="echo")

        asyncio.run(go())
        self.assertEqual(len(f.calls["GetCapabilities"]), _api.RETRY_ATTEMPTS)
        ids = f.calls["StartTask"]
        self.assertEqual(len(ids), 2)
        self.assertTrue(ids[0] and ids[0] == ids[1], ids)

    def test_a_declared_reason_decides(self) -> None:
        # UNAVAILABLE with a reason errors.proto does not mark retryable is not repeated
        # (none is declared with that code today, so LEASE_LOST stands in for one).
        f = Flaky(fail=1, details=status_details(Reason.LEASE_LOST))
        with Client(f.serve(self)) as c:
            with self.assertRaises(AgentplaneError) as e:
                c.capabilities.get_capabilities()
        self.assertEqual(e.exception.reason, Reason.LEASE_LOST)
        self.assertEqual(len(f.calls["GetCapabilities"]), 1)

    def test_the_timeout_covers_every_attempt(self) -> None:
        f = Flaky(fail=100)
        with Client(f.serve(self)) as c:
            t0 = time.monotonic()
            with self.assertRaises(AgentplaneError):
                c.capabilities.get_capabilities(timeout=0.05)
            elapsed = time.monotonic() - t0
        # Not a timing assertion on the SDK's speed: fewer attempts than the cap were made
        # because the backoff would have outlived the timeout.
        self.assertLess(len(f.calls["GetCapabilities"]), _api.RETRY_ATTEMPTS, elapsed)

    def test_policy(self) -> None:
        unavailable = AgentplaneError(grpc.StatusCode.UNAVAILABLE, "m")
        self.assertTrue(_retry.retryable("agentplane.v1.TaskService/GetTask", unavailable))
        self.assertFalse(_retry.retryable("agentplane.v1.AdminService/RetryWebhookDeadLetter", unavailable))
        self.assertFalse(_retry.retryable("agentplane.v1.TaskService/GetTask", AgentplaneError(grpc.StatusCode.INTERNAL, "m")))
        for n in range(1, 10):
            d = _retry.delay(n)
            top = min(_api.BACKOFF_BASE * 2 ** (n - 1), _api.BACKOFF_MAX)
            self.assertTrue(top * (1 - _api.JITTER) <= d <= top, (n, d))

    def test_stop_reasons_are_the_generated_ones(self) -> None:
        generated = {StopReason.LEASE_LOST, StopReason.CANCELED, StopReason.STOPPING}
        self.assertEqual(set(get_args(worker.StopReason)), {""} | generated)


if __name__ == "__main__":
    unittest.main()
