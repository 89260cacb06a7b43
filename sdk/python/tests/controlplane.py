"""A real control plane for the tests: built from the tree (or $AGENTPLANE_BIN),
started on a free loopback port with a temporary data directory, restartable on the
same port and data."""

import atexit
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from types import FrameType

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(HERE, "..", "src"))

_built: str | None = None
_running: set["ControlPlane"] = set()  # servers started and not yet stopped


def _stop_all(*_: object) -> None:
    for cp in list(_running):
        cp.stop()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _stop_all()
    sys.exit(128 + signum)


# Servers still running when the suite ends (a test failed before its cleanup, the run was
# interrupted) are stopped with it and their data directories removed.
atexit.register(_stop_all)
signal.signal(signal.SIGTERM, _on_sigterm)


def binary() -> str:
    """Returns the controlplane binary: $AGENTPLANE_BIN, or one built once per run."""
    global _built
    if os.environ.get("AGENTPLANE_BIN"):
        return os.environ["AGENTPLANE_BIN"]
    if _built is None:
        out = tempfile.mkdtemp(prefix="agentplane-pybin-")
        _built = os.path.join(out, "controlplane")
        subprocess.run(["go", "build", "-o", _built, "./cmd/controlplane"], cwd=REPO, check=True, timeout=600)
    return _built


def new_token(tenant: str, *roles: str) -> tuple[str, str]:
    """Returns (token, config entry YAML) from `controlplane token new`."""
    args = [binary(), "token", "new", "--name", "py-" + tenant, "--tenant", tenant]
    for r in roles:
        args += ["--role", r]
    out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"^\s+(apt_\S+)$", out, re.M)
    assert m is not None, out
    token = m.group(1)
    entry = out[out.index("  - name:"):]
    return token, entry


def tls_files(directory: str) -> tuple[str, str]:
    """Writes a self-signed certificate for 127.0.0.1 that is its own CA (Go's
    crypto/tls/generate_cert.go) into directory; returns (cert.pem, key.pem)."""
    goroot = subprocess.run(["go", "env", "GOROOT"], check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run(["go", "run", os.path.join(goroot, "src", "crypto", "tls", "generate_cert.go"),
                    "--host", "127.0.0.1", "--ca"], cwd=directory, check=True, capture_output=True, timeout=300)
    return os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class ControlPlane:
    def __init__(self, config_yaml: str | None = None) -> None:
        self.data_dir = tempfile.mkdtemp(prefix="agentplane-pytest-")
        self.extra: list[str] = []
        if config_yaml is not None:
            path = os.path.join(self.data_dir, "controlplane.yaml")
            with open(path, "w") as f:
                f.write(config_yaml)
            self.extra = ["--config", path]
        self.address = f"127.0.0.1:{_free_port()}"
        self.proc: "subprocess.Popen[str] | None" = None
        _running.add(self)
        self.start()

    def start(self) -> None:
        self.proc = proc = subprocess.Popen(
            [binary(), "--data-dir", self.data_dir, "--grpc-addr", self.address, "--http-addr", "off",
             "--log-level", "warn", *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        out = ""
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"controlplane exited ({proc.wait()}):\n{out}")
            out += line
            if re.search(r"^\s+store\s", line):
                return
        raise RuntimeError(f"controlplane did not start within 60 s:\n{out}")

    def kill(self) -> None:
        """SIGKILLs the server (no graceful shutdown)."""
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        _running.discard(self)
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)
        if self.proc and self.proc.stdout:
            self.proc.stdout.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)
