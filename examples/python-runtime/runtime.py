#!/usr/bin/python3
"""A Python runtime for agentplane: a plain Python function agent whose tool calls go
through the control plane's gate (sdk/python's Worker).

    /usr/bin/python3 examples/python-runtime/runtime.py --address 127.0.0.1:7233

It uses the agentplane package installed (pip install agentplane, or the wheel of
sdk/python), or else the SDK's source tree beside it in this repository.

The "agent" answers a question about the weather: it calls the tool get_weather and,
when asked to, delete_file, each only after the gate allows it (a human approves a
gated call with HitlService.ResolveInterrupt). Start a task with the input "weather in
Paris, then clean up" and an interrupt_policy that gates delete_file ({"allowlist":
{"tools": ["delete_file"]}}) to see an approval; sdk/python/tests/test_example.py does
exactly that.
"""

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

try:
    import agentplane
except ImportError:  # not installed: the SDK's source tree in this repository
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python", "src"))
    import agentplane

from agentplane import Client  # noqa: E402
from agentplane.worker import Task, Worker  # noqa: E402

TOOLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "get_weather": lambda args: {"city": args["city"], "temp_c": 21, "sky": "clear"},
    "delete_file": lambda args: {"deleted": args["path"]},
}


def agent(task: Task) -> None:
    """The agent: a plain function of the task's input that runs tools through the gate."""
    question = task.input_text
    task.say(f"Looking into: {question}")
    plan = [("c1", "get_weather", {"city": "Paris"})]
    if "clean up" in question:
        plan.append(("c2", "delete_file", {"path": "/tmp/scratch.txt"}))
    results: dict[str, Any] = {}
    for call_id, name, args in plan:
        gate = task.tool_call(call_id, name, json.dumps(args))
        if gate.reported:  # run under an earlier lease of this task: never run it twice
            continue
        if not gate.allowed:
            results[name] = f"not run: {gate.reason}"
            continue
        result = TOOLS[name](json.loads(gate.arguments_json))  # the approved (or edited) arguments
        task.tool_result(call_id, name, result)
        results[name] = result
    task.complete(output={"structured": results})


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--address", default="127.0.0.1:7233")
    p.add_argument("--token", default=os.environ.get("AGENTPLANE_TOKEN"))
    p.add_argument("--runtime-id", default="python-example")
    p.add_argument("--queue", action="append", default=[], help="run queue to serve (repeatable)")
    p.add_argument("--delivery", choices=["interactive", "durable"], default="interactive")
    p.add_argument("--capacity", type=int, default=4)
    p.add_argument("--exit-after", type=int, default=0, help="stop after this many tasks ended (0: never)")
    a = p.parse_args()

    client = Client(a.address, token=a.token)
    ended: list[str] = []

    def handler(task: Task) -> None:
        try:
            agent(task)
        finally:
            ended.append(task.task_id)
            if a.exit_after and len(ended) >= a.exit_after:
                worker.stop(wait=False)

    worker = Worker(client, handler, a.runtime_id, capacity=a.capacity, queues=a.queue, delivery=a.delivery)
    sdk = os.path.dirname(os.path.abspath(agentplane.__file__))
    print(f"serving {a.queue or ['default']} on {a.address} (agentplane {agentplane.__version__} from {sdk})", flush=True)
    # SIGTERM or Ctrl-C: stop leasing, drain for up to 20 s, hand back what still runs.
    worker.run_until_signal()
    client.close()


if __name__ == "__main__":
    main()
