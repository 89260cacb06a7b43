"""The Python SDK's driver of the conformance scenarios (testdata/conformance/
scenarios.json; sdk/conformance_test.go runs it with the Go and TypeScript drivers). It
reads its scenario from AGENTPLANE_SCENARIO, connects to AGENTPLANE_ADDRESS with the
SDK's defaults, and writes what it saw as JSON lines on stdout; a line on stdin lets a
scenario go on. Not a unittest module (its name does not start with test_)."""

import json
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from google.protobuf import json_format  # noqa: E402

from agentplane import AgentplaneError, Client  # noqa: E402
from agentplane import _api  # noqa: E402
from agentplane.client import SERVICES, _message_class, snake  # noqa: E402
from agentplane.v1 import task_pb2  # noqa: E402
from agentplane.worker import TaskStopped, Worker  # noqa: E402

_lock = threading.Lock()


def emit(v):
    with _lock:
        sys.stdout.write(json.dumps(v) + "\n")
        sys.stdout.flush()


def describe(err):
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


def invoke(c, call):
    service, name = call["method"].split("/")
    attr, pb2 = next((a, p) for a, p, _, n in SERVICES if "agentplane.v1." + n == service)
    svc = getattr(c, attr)
    method = pb2.DESCRIPTOR.services_by_name[service.split(".")[-1]].methods_by_name[name]
    req = json_format.ParseDict(call["request"], _message_class(method.input_type)())
    err = None
    try:
        getattr(svc, snake(name))(req)
    except AgentplaneError as e:
        err = e
    res = {"method": call["method"], **describe(err)}
    if "request_id" in req.DESCRIPTOR.fields_by_name:
        res["caller_request_id"] = req.request_id
    return res


def watch(c, task_id):
    def wait():
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


def lease_lost(c, queue):
    done = threading.Event()
    first = [True]

    def handler(task):
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


def main():
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
