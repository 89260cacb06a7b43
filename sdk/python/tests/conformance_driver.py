"""The Python SDK's driver of the conformance scenarios (testdata/conformance/
scenarios.json; sdk/conformance_test.go runs it with the Go and TypeScript drivers). It
reads its scenario from AGENTPLANE_SCENARIO, connects to AGENTPLANE_ADDRESS with the
SDK's defaults, and writes what it saw as JSON lines on stdout; a line on stdin lets a
scenario go on. Not a unittest module (its name does not start with test_)."""

import json
import os
import sys
import threading
from typing import Any, cast

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from google.protobuf import json_format  # noqa: E402

from agentplane import AgentplaneError, Client  # noqa: E402
from agentplane import _api  # noqa: E402
from agentplane._calls import Unary  # noqa: E402
from agentplane.v1 import task_pb2  # noqa: E402
from agentplane.worker import Task, TaskStopped, Worker  # noqa: E402

_lock = threading.Lock()


def emit(v: dict[str, Any]) -> None:
    with _lock:
        sys.stdout.write(json.dumps(v) + "\n")
        sys.stdout.flush()


def describe(err: AgentplaneError | None) -> dict[str, Any]:
    if err is None:
        return {"code": "OK"}
    return {
        "code": err.code.name,
        "reason": err.reason,
        "reason_name": _api.REASON_NAMES.get(err.reason, ""),
        "retryable": err.reason in _api.RETRYABLE_REASONS,
        "domain": err.domain,
        "metadata": dict(err.metadata),
    }


SERVICES = {
    "agentplane.v1.TaskService": "tasks", "agentplane.v1.SpecService": "specs", "agentplane.v1.HitlService": "hitl",
    "agentplane.v1.RuntimeService": "runtime", "agentplane.v1.AdminService": "admin",
    "agentplane.v1.CapabilityService": "capabilities",
}


def invoke(c: Client, call: dict[str, Any]) -> dict[str, Any]:
    """Calls call["method"] through the client's typed service (so through its request ids
    and retries) with call["request"] as the request message's JSON."""
    method: str = call["method"]
    service: object = getattr(c, SERVICES[method.split("/")[0]])
    members: dict[str, object] = vars(service)
    rpc: Unary[Any, Any] | None = None
    for r in members.values():
        if isinstance(r, Unary) and r.method == "/" + method:
            rpc = cast("Unary[Any, Any]", r)
    if rpc is None:
        raise SystemExit(f"no unary RPC {method}")
    req = json_format.ParseDict(call["request"], rpc.request_type())
    err = None
    try:
        rpc(req)
    except AgentplaneError as e:
        err = e
    res = {"method": method, **describe(err)}
    if "request_id" in req.DESCRIPTOR.fields_by_name:
        res["caller_request_id"] = getattr(req, "request_id")
    return res


def watch(c: Client, task_id: str) -> None:
    def wait() -> None:
        try:
            t = c.task(task_id).wait()
            emit({"wait": task_pb2.TaskState.Name(t.state)})
        except Exception as e:  # noqa: BLE001 - reported to the test
            emit({"wait_error": repr(e)})

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        for resp in c.watch(task_id):
            if resp.WhichOneof("kind") == "event":
                emit({"seq": resp.event.sequence})
    except AgentplaneError as e:
        emit({"watch_error": repr(e)})
    waiter.join()


def lease_lost(c: Client, queue: str) -> None:
    done = threading.Event()
    first = [True]

    def handler(task: Task) -> None:
        if not first[0]:
            task.complete(text="done")
            return
        first[0] = False
        emit({"started": {"task_id": task.ref["task_id"], "lease_id": task.ref["lease_id"], "epoch": task.ref["epoch"]}})
        sys.stdin.readline()
        write_reason = ""
        try:
            task.say("still mine?")
        except TaskStopped as e:
            cause = e.__cause__
            write_reason = cause.reason if isinstance(cause, AgentplaneError) else ""
        except AgentplaneError as e:
            write_reason = e.reason
        emit({"write_reason": write_reason, "stop_reason": task.stop_reason if task.canceled.is_set() else ""})
        done.set()

    w = Worker(c, handler, "conformance-py", queues=[queue], poll_wait=1.0)
    runner = threading.Thread(target=w.run, daemon=True)
    runner.start()
    done.wait(120)
    w.stop()
    runner.join(60)


def main() -> None:
    sc = json.loads(os.environ["AGENTPLANE_SCENARIO"])
    with Client(os.environ["AGENTPLANE_ADDRESS"]) as c:
        name = sc["name"]
        if name in ("retry_after_unavailable", "error_reason_and_metadata"):
            for call in sc["calls"]:
                emit(invoke(c, call))
        elif name == "watch_across_restart":
            watch(c, sc["task_id"])
        elif name == "lease_lost_mid_handler":
            lease_lost(c, sc["queue"])
        else:
            raise SystemExit(f"unknown scenario {name}")
        emit({"done": True})


if __name__ == "__main__":
    main()
