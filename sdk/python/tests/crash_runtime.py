"""A runtime process for test_worker's crash test: it runs the allowed call c1 (appending
a line to the file named by argv[2], the tool's side effect), says so on stdout, and then
hangs until the test SIGKILLs it, before it reports the call's result."""

import sys
import threading

import controlplane  # noqa: F401  # pyright: ignore[reportUnusedImport]  (puts ../src on sys.path)
from agentplane import Client
from agentplane.worker import Task, Worker


def main() -> None:
    address, effects, queue = sys.argv[1], sys.argv[2], sys.argv[3]

    def handler(task: Task) -> None:
        gate = task.tool_call("c1", "delete_file", '{"path": "/tmp/x"}')
        if gate.allowed:
            with open(effects, "a") as f:
                f.write("ran c1\n")
            print("RAN", flush=True)
            threading.Event().wait()  # killed here: the result is never reported

    Worker(Client(address), handler, "py-crashing", queues=[queue], poll_wait=0.2).run()


if __name__ == "__main__":
    main()
