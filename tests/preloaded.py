"""`dbtier ARGS` as a process of its own, forked from one that has imported dbtier already.

Most of a refused command's half second is Python importing psycopg, numpy, pyarrow and rich; the
suite runs hundreds of such commands. A parent process (started once per test session) imports every
command's module and then only forks: each child takes the caller's arguments, environment, working
directory and output files, runs `python -m dbtier`'s own code (runpy, as -m does), and exits with its
exit status. The child is a separate process like any subprocess (its own pid, file descriptors,
signals, exit status, output); what it skips is the import.

What it cannot stand in for, the caller's `dbtier()` runs as a plain subprocess: an environment that
changes what is imported or loaded (the native library's folder, Python's or the loader's variables),
standard input, or a program that needs its own command line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

#: variables read while modules load (the native library, Python's and the dynamic loader's own): a
#: different value needs a fresh interpreter
IMPORT_SENSITIVE = ("DBTIER_NATIVE_DIR", "PYTHON", "LD_", "ASAN_", "UBSAN_", "LSAN_", "OPENBLAS", "OMP_", "MKL_")

_PARENT = r'''
import json, os, runpy, select, signal, socket, sys, tempfile, traceback
import dbtier.cli
from dbtier.cli import cli
for name in cli.list_commands(None):  # every command's module, imported once here
    cli.get_command(None, name)
from dbtier.report import charts
charts.pyplot()  # matplotlib: most of a second of each command that draws a chart
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(sys.argv[1])
listener.listen(64)
listener.setblocking(False)  # accept() below only after select() said a connection waits, or else returns
print("ready", flush=True)
while True:
    while True:  # reap the children that ended
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
    if sys.stdin in select.select([listener, sys.stdin], [], [], 0.5)[0]:
        if not sys.stdin.buffer.read1(1):  # the test session ended: so does this process
            break
        continue
    try:
        conn, _ = listener.accept()
    except BlockingIOError:
        continue
    conn.setblocking(True)
    if os.fork():
        conn.close()
        continue
    # the child: the caller's process, from here on
    listener.close()
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            os._exit(0)
        data += chunk
    req = json.loads(data)
    conn.sendall(f"{os.getpid()}\n".encode())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    os.close(null)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    tempfile.tempdir = None  # TMPDIR is read again
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv = ["dbtier", *req["args"]]
    code = 0
    try:
        runpy.run_module("dbtier", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    try:
        conn.sendall(f"{code}\n".encode())
    finally:
        os._exit(code)
'''


class Preloaded:
    """The forking parent; start() once, run() from any thread."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="dbtier-test-preloaded-"))
        self.socket = self.folder / "s"
        self.proc: subprocess.Popen | None = None
        self.lock = threading.Lock()
        self.count = 0  # commands run: each one's output files are numbered

    def start(self) -> None:
        proc = subprocess.Popen([sys.executable, "-c", _PARENT, str(self.socket)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the preloaded dbtier did not start (exit status {proc.wait()})")
        self.proc = proc  # only now: can_run() says yes once it listens

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()  # it reads the end of its input and leaves
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for entry in self.folder.iterdir():
            entry.unlink()
        self.folder.rmdir()

    def can_run(self, env: dict | None) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            return False
        if env is None:
            return True
        changed = {k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)}
        return not any(k.startswith(IMPORT_SENSITIVE) for k in changed)

    def run(self, args: list[str], env: dict | None = None, cwd=None, timeout: float | None = None
            ) -> subprocess.CompletedProcess:
        with self.lock:
            self.count += 1
            n = self.count
        out, err = self.folder / f"{n}.out", self.folder / f"{n}.err"
        req = {"args": list(args), "env": dict(os.environ if env is None else env),
               "cwd": str(cwd) if cwd is not None else os.getcwd(), "stdout": str(out), "stderr": str(err)}
        pid = None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(str(self.socket))
            conn.sendall(json.dumps(req).encode() + b"\n")
            conn.settimeout(timeout)
            data = b""
            try:
                while data.count(b"\n") < 2:
                    chunk = conn.recv(4096)
                    if not chunk:  # the child ended without its answer: killed by a signal
                        break
                    data += chunk
                    if pid is None and b"\n" in data:
                        pid = int(data.split(b"\n")[0])
            except socket.timeout:
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                stdout, stderr = self._outputs(out, err)
                raise subprocess.TimeoutExpired(["dbtier", *args], timeout, stdout, stderr) from None
        lines = data.split(b"\n")
        code = int(lines[1]) if len(lines) > 2 else -signal.SIGKILL
        stdout, stderr = self._outputs(out, err)
        return subprocess.CompletedProcess(["dbtier", *args], code, stdout, stderr)

    @staticmethod
    def _outputs(out: Path, err: Path) -> tuple[str, str]:
        try:
            return out.read_text(errors="replace"), err.read_text(errors="replace")
        finally:
            out.unlink(missing_ok=True)
            err.unlink(missing_ok=True)
