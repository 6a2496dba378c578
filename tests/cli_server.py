"""`playground ARGS` in a process of its own, without a fresh interpreter's start each time.

A test of the CLI contract runs the command as a separate process: its own exit status,
its own stdout and stderr (pipes, as `subprocess.run(capture_output=True)` gives), its own
environment, working directory and umask, and a crash or an `os._exit` in it cannot
touch the test process. Started with `python -m playground.cli`, each such process
spends about 0.3 s importing the CLI before it does anything (this 2-core machine; most
commands then take a few milliseconds), and the suite runs a few hundred of them.

So one server process per test session (a plain interpreter: no torch, no pytest) imports
the CLI once, and forks a process per command (through a handler process that waits for
it, so that commands run side by side). The command's process takes the caller's pipes as
its stdin, stdout and stderr, the caller's environment (replacing the server's), working
directory and umask, then runs the CLI's module as `__main__`, exactly what `python -m
playground.cli` runs, and ends the way that interpreter would (an uncaught exception: its
traceback on stderr, exit 1). `run_cli` returns a `subprocess.CompletedProcess` and
raises `subprocess.TimeoutExpired` (after killing the command), as `subprocess.run` does;
`CliProcess` is the command as `subprocess.Popen` gives it (pid, signals, communicate).

What the server cannot stand for, callers keep running in a fresh interpreter
(`subprocess.run`): anything that asks which modules a process imports (the server has
the CLI's imported), and anything that looks for the command's own process by its
environment in /proc (a forked child's /proc/PID/environ is the server's initial one; the
ranks a `run` starts are fresh interpreters with the caller's environment, as ever).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_HEADER = struct.Struct("!I")


# == the client (the test process) ========================================================
class _Server:
    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="playground-cli-server-")
        self.address = os.path.join(self.folder, "socket")
        log = os.path.join(self.folder, "server.log")  # why it did not start, if it did not
        with open(log, "wb") as errors:
            self.proc = subprocess.Popen(
                [sys.executable, __file__, self.address, str(os.getpid())],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                env=dict(os.environ),
            )
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(self.folder, "ready")):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                said = Path(log).read_text(errors="replace")[-3000:]
                raise RuntimeError(
                    f"the CLI server did not start (exit {self.proc.poll()}):\n{said}"
                )
            time.sleep(0.01)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: _Server | None = None


def _get_server() -> _Server:
    global _server
    if _server is None or not _server.alive():
        _server = _Server()
        atexit.register(_server.stop)
    return _server


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the CLI server closed the connection")
        data += chunk
    return data


class CliProcess:
    """A command started by the server: what `subprocess.Popen` offers that the tests use
    (pid, send_signal, kill, communicate, returncode), stdout and stderr as text."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        entry: str = "module",
        memory_limit: int | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        server = _get_server()
        self.args = ["playground", *argv]
        self.returncode: int | None = None
        request = {
            "argv": list(argv),
            "env": dict(os.environ if env is None else env),
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "umask": _current_umask(),
            "entry": entry,
            "memory_limit": memory_limit,
        }
        body = json.dumps(request).encode()
        stdin = os.open(os.devnull, os.O_RDONLY)
        self._out, out_w = os.pipe()
        self._err, err_w = os.pipe()
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._conn.connect(server.address)
            socket.send_fds(self._conn, [_HEADER.pack(len(body))], [stdin, out_w, err_w])
            self._conn.sendall(body)
        finally:
            for fd in (stdin, out_w, err_w):
                os.close(fd)
        self.pid: int = _HEADER.unpack(_recv_exact(self._conn, _HEADER.size))[0]
        self._chunks: dict[int, list[bytes]] = {self._out: [], self._err: []}
        self._open = {self._out, self._err}

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Read stdout and stderr to their ends, then the exit status (Popen's: -N for a
        signal N); `subprocess.TimeoutExpired` past `timeout`, the process left running."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for fd in self._open:
                selector.register(fd, selectors.EVENT_READ)
            while self._open:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 65536)
                    if data:
                        self._chunks[key.fd].append(data)
                    else:
                        selector.unregister(key.fd)
                        self._open.discard(key.fd)
                        os.close(key.fd)
        if self.returncode is None:
            left = None if deadline is None else max(0.1, deadline - time.monotonic())
            self._conn.settimeout(left)
            try:
                self.returncode = struct.unpack("!i", _recv_exact(self._conn, 4))[0]
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self._conn.close()
        return _text(b"".join(self._chunks[self._out])), _text(b"".join(self._chunks[self._err]))

    def __del__(self) -> None:
        for fd in self._open:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._open = set()


def run_cli(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    entry: str = "module",
    memory_limit: int | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m playground.cli ARGV` (entry="module") or `python -c "sys.exit(main(ARGV))"`
    (entry="main") as a forked process, as `subprocess.run(capture_output=True, text=True,
    stdin=DEVNULL)` runs it: killed and `subprocess.TimeoutExpired` past `timeout`.
    `env`: the child's whole environment (default: this process's); `memory_limit`: its
    RLIMIT_AS in bytes."""
    proc = CliProcess(argv, env=env, entry=entry, memory_limit=memory_limit, cwd=cwd)
    try:
        out, err = proc.communicate(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    assert proc.returncode is not None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _text(data: bytes) -> str:
    # subprocess.run(text=True): the locale's encoding, universal newlines.
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def _current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# == the server (a fresh interpreter, started by _Server) ================================
def _serve(address: str, parent: int) -> None:
    # What `python -m playground.cli` imports before it reads its arguments, and the
    # lessons every command looks up: imported once here, not once per command.
    import playground.cli  # noqa: F401
    import playground.cli_help  # noqa: F401
    import playground.cli_parser  # noqa: F401  (the commands' parser, built per command)
    import playground.report  # noqa: F401
    import playground.session  # noqa: F401
    import scenarios.registry  # noqa: F401

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(64)
    listener.settimeout(1.0)
    # Each request gets a handler process of its own (forked, so that commands run side by
    # side: the tests start fifty budget guards at once); the server never waits for one.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    Path(address).with_name("ready").touch()
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test session is gone
                return
            continue
        conn.settimeout(None)
        msg, fds, _flags, _addr = socket.recv_fds(conn, _HEADER.size, 3)
        if len(msg) < _HEADER.size:
            msg += _recv_exact(conn, _HEADER.size - len(msg))
        request = json.loads(_recv_exact(conn, _HEADER.unpack(msg)[0]))
        if os.fork() == 0:
            listener.close()
            _handle(conn, fds, request)  # never returns
        for fd in fds:
            os.close(fd)
        conn.close()


def _handle(conn: socket.socket, fds: list[int], request: dict) -> None:
    """The handler: forks the command's process, tells the caller its pid, waits for it and
    tells the caller how it ended (as `os.waitpid` and Popen say it: -N for signal N)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this one waits for its child
    pid = os.fork()
    if pid == 0:
        conn.close()
        _command(fds, request)  # never returns
    for fd in fds:
        os.close(fd)
    with contextlib.suppress(OSError):  # the caller may have gone (a timeout, a kill)
        conn.sendall(_HEADER.pack(pid))
    _, wait_status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):
        conn.sendall(struct.pack("!i", os.waitstatus_to_exitcode(wait_status)))
    os._exit(0)


def _command(fds: list[int], request: dict) -> None:
    """The command's process: the caller's pipes as stdin, stdout and stderr, then the CLI,
    ended as an interpreter ends (SystemExit's code; an uncaught exception propagates up
    this stack and the interpreter prints its traceback and exits 1)."""
    import runpy

    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    _become(request)
    if request["entry"] == "main":
        from playground.cli import main

        sys.exit(main(request["argv"]))
    # A fresh `python -m` has the package imported but not the module it runs.
    del sys.modules["playground.cli"]
    runpy.run_module("playground.cli", run_name="__main__", alter_sys=True)
    sys.exit(0)


def _become(request: dict) -> None:
    """This forked child takes on the caller's environment, directory, umask and limits."""
    import resource

    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    os.umask(request["umask"])
    if request["memory_limit"] is not None:
        limit = request["memory_limit"]
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # The standard streams on the new descriptors, as an interpreter makes them for pipes:
    # block-buffered stdout, line-buffered stderr that escapes what it cannot encode.
    encoding = sys.stdout.encoding
    sys.stdin = sys.__stdin__ = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stdout = sys.__stdout__ = open(1, "w", encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stderr = sys.__stderr__ = open(  # noqa: SIM115
        2, "w", encoding=encoding, errors="backslashreplace", closefd=False, buffering=1
    )
    # `python -m` puts the working directory first on the path, and the module in argv[0].
    sys.path[0] = request["cwd"]
    sys.argv = [str(ROOT / "playground" / "cli.py"), *request["argv"]]


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
