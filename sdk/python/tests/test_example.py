"""examples/python-runtime/runtime.py, run as a process against a real control plane:
its gated tool call waits for an approval, then the task completes.

AGENTPLANE_EXAMPLE_PYTHON names the interpreter that runs the example (default Debian's
/usr/bin/python3, with the SDK's source tree), and AGENTPLANE_EXAMPLE_SDK_UNDER the
directory its agentplane package must come from: sdk/sdk_test.go runs the example from
a virtual environment where the wheel was installed, and checks it used that wheel."""

import os
import subprocess
import threading
import unittest

import controlplane
from agentplane import Client, from_value
from agentplane.v1 import task_pb2

AGENT = b"apiVersion: qar/v1\nkind: AgentSpec\nname: weather\ninstructions: Answer briefly.\nmodel: m\n"
RUNTIME = os.path.join(controlplane.REPO, "examples", "python-runtime", "runtime.py")
PYTHON = os.environ.get("AGENTPLANE_EXAMPLE_PYTHON", "/usr/bin/python3")
SDK_UNDER = os.environ.get("AGENTPLANE_EXAMPLE_SDK_UNDER", os.path.join(controlplane.REPO, "sdk", "python", "src"))


class ExampleRuntimeTest(unittest.TestCase):
    def test_gated_call_approved(self):
        cp = controlplane.ControlPlane()
        self.addCleanup(cp.stop)
        c = Client(cp.address)
        self.addCleanup(c.close)
        proc = subprocess.Popen([PYTHON, "-W", "ignore", RUNTIME, "--address", cp.address, "--queue", "example",
                                 "--exit-after", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        assert proc.stdout is not None
        serving = proc.stdout.readline()
        sdk = serving.rsplit(" from ", 1)[-1].strip().rstrip(")")
        self.assertTrue(os.path.realpath(sdk).startswith(os.path.realpath(SDK_UNDER) + os.sep),
                        f"the example's agentplane is not from {SDK_UNDER}: {serving}")
        t = c.tasks.start_task(document=AGENT, queue="example", interrupt_policy={"allowlist": {"tools": ["delete_file"]}},
                               input={"parts": [{"text": "weather in Paris, then clean up"}]}).task
        tick = threading.Event()
        interrupt = None
        for _ in range(600):
            its = [i for i in c.hitl.list_interrupts().interrupts if i.task_id == t.task_id]
            if its:
                interrupt = its[0]
                break
            tick.wait(0.05)
        assert interrupt is not None, "no interrupt for the gated call"
        self.assertEqual(interrupt.call_id, "c2")
        c.hitl.resolve_interrupt(interrupt_id=interrupt.interrupt_id, approve={})
        out, _ = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, out)
        task = c.tasks.get_task(task_id=t.task_id).task
        self.assertEqual(task.state, task_pb2.TASK_STATE_COMPLETED, out)
        self.assertEqual(from_value(task.output.structured),
                         {"get_weather": {"city": "Paris", "temp_c": 21.0, "sky": "clear"},
                          "delete_file": {"deleted": "/tmp/scratch.txt"}})


if __name__ == "__main__":
    unittest.main()
