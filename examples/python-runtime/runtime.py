#!/usr/bin/python3
"""A Python runtime for agentplane: a plain Python function agent whose tool calls go
through the control plane's gate (sdk/python's Worker).

    PYTHONPATH=sdk/python/src /usr/bin/python3 examples/python-runtime/runtime.py --address 127.0.0.1:7233

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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python", "src"))

from agentplane import Client  # noqa: E402
from agentplane.worker import Worker  # noqa: E402

TOOLS = {
    "get_weather": lambda args: {"city": args["city"], "temp_c": 21, "sky": "clear"},
    "delete_file": lambda args: {"deleted": args["path"]},
}


def agent(task):
    """The agent: a plain function of the task's input that runs tools through the gate."""
    question = task.input_text
    task.say(f"Looking into: {question}")
    plan = [("c1", "get_weather", {"city": "Paris"})]
    if "clean up" in question:
        plan.append(("c2", "delete_file", {"path": "/tmp/scratch.txt"}))
    results = {}
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--address", default="127.0.0.1:7233")
    p.add_argument("--token", default=os.environ.get("AGENTPLANE_TOKEN"))
    p.add_argument("--runtime-id", default="python-example")
    p.add_argument("--queue", action="append", default=[], help="run queue to serve (repeatable)")
    p.add_argument("--delivery", choices=["interactive", "durable"], default="interactive")
    p.add_argument("--capacity", type=int, default=4)
    p.add_argument("--exit-after", type=int, default=0, help="stop after this many tasks ended (0: never)")
    a = p.parse_args()

    client = Client(a.address, token=a.token)
    ended = []

    def handler(task):
        try:
            agent(task)
        finally:
            ended.append(task.task_id)
            if a.exit_after and len(ended) >= a.exit_after:
                worker.stop(wait=False)

    worker = Worker(client, handler, a.runtime_id, capacity=a.capacity, queues=a.queue, delivery=a.delivery)
    print(f"serving {a.queue or ['default']} on {a.address}", flush=True)
    # SIGTERM or Ctrl-C: stop leasing, drain for up to 20 s, hand back what still runs.
    worker.run_until_signal()
    client.close()


if __name__ == "__main__":
    main()
