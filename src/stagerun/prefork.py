"""Stage processes forked from one that has imported their modules already (the runner's default).

A stage command ``python stages/<name>.py ARGS`` spends about 2 s importing torch and priorlab before
it does any work (``reports/bench.json``: 2.3 s a stage, 8 % of the cpu profile's stage time).  The
parallel runner (:mod:`stagerun.repro`) therefore starts one *preloaded* process, which imports what
the stage scripts import (:func:`preload_modules`), once, and then forks a child per stage command.  The child does what
``python script ARGS`` would do after its imports: it makes its own session, changes to the stage's
folder, takes the worker's environment, and runs the script as ``__main__`` with the command's
arguments; its exit status is the script's.  Outputs are unchanged: every stage seeds its own random
state and sets its own thread counts (tested: a stage forked and the same stage spawned write
byte-identical outputs).

The preloaded process ignores SIGINT and SIGTERM, runs no torch operation (so there is no thread pool to copy into a child) and
never initialises CUDA; the runner does not use it with ``--gpus``.  Only commands of exactly that
shape, with the same interpreter as the runner's, are forked (:func:`script_command`); others run in
a shell, as before.

Protocol, one JSON object a line: requests ``{"argv": [script, *args], "cwd": ..., "env": {...}}``
on the request pipe; on the reply pipe ``{"ready": true}`` once the imports are done, then
``{"pid": P}`` per request once its child is in its own session, and ``{"exited": P, "status": S,
"maxrss_kib": R}`` when a child exits (``S`` as :func:`os.waitstatus_to_exitcode`).  End-of-file on
the request pipe ends the preloaded process; its children run on, and die with the runner as any
stage does (:func:`priorlab.runtime.die_with_runner`).
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import importlib
import json
import os
import runpy
import select
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import priorlab

POLL_S = 0.05


def script_command(cmd: str, env: dict[str, str]) -> list[str] | None:
    """``[script, *args]`` when ``cmd`` is ``python SCRIPT.py ARGS`` with plain words only (nothing
    the shell would expand or join) and ``python`` (on ``env``'s PATH, or a path) is this interpreter;
    else None."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    if len(words) < 2 or not os.path.basename(words[0]).startswith("python") or not words[1].endswith(".py"):
        return None
    if any(shlex.quote(w) != w for w in words):  # quoting, globs, $VARS, ;, &&, |, redirections ...
        return None
    found = shutil.which(words[0], path=env.get("PATH"))
    if found is None or os.path.realpath(found) != os.path.realpath(sys.executable):
        return None
    return words[1:]


LAZY_IMPORTS = ("torch._dynamo",)
"""Modules a stage imports on its way (``torch.optim`` imports ``torch._dynamo`` when the first optimiser
is built: 2 s), preloaded with the stage scripts' imports and every priorlab module."""


def preload_modules(scripts_dir: Path) -> list[str]:
    """What the preloaded process imports: the stage scripts' top-level imports, every priorlab module
    (stages import metrics, plots and studies inside functions) and :data:`LAZY_IMPORTS`."""
    import pkgutil

    ours = [m.name for m in pkgutil.walk_packages(priorlab.__path__, "priorlab.") if not m.name.endswith("__main__")]
    return [*stage_imports(scripts_dir), *sorted(ours), *LAZY_IMPORTS]


def stage_imports(scripts_dir: Path) -> list[str]:
    """The modules the stage scripts in ``scripts_dir`` import at their top level, sorted."""
    names: set[str] = set()
    for script in sorted(scripts_dir.glob("*.py")):
        with contextlib.suppress(OSError, SyntaxError, ValueError):
            for node in ast.parse(script.read_text()).body:
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module)
    return sorted(names)


LOST = -int(signal.SIGKILL)
"""The exit status :meth:`Preloaded.poll` gives a child whose status was lost with the preloaded process."""


class Ended(RuntimeError):
    """The preloaded process is gone (it runs no more stages)."""


def process_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Preloaded:
    """The runner's side: start the preloaded process, fork a stage, learn when it exits."""

    def __init__(self, scripts_dir: Path, pass_fds: tuple[int, ...] = (), env: dict[str, str] | None = None):
        req_r, self._req_w = os.pipe()
        self._rep_r, rep_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "stagerun.prefork", str(req_r), str(rep_w), str(scripts_dir)],
                stdin=subprocess.DEVNULL, start_new_session=True, pass_fds=(req_r, rep_w, *pass_fds),
                env=env)
        finally:
            os.close(req_r)
            os.close(rep_w)
        self._buf = b""
        self._ready = False
        self.exited: dict[int, tuple[int, float]] = {}
        self.ended = False  # the preloaded process is gone (killed): the runner starts new interpreters

    def _messages(self, timeout: float | None) -> list[dict]:
        """Replies available within ``timeout`` (None: wait for at least one)."""
        ready, _, _ = select.select([self._rep_r], [], [], timeout)
        if not ready:
            return []
        chunk = os.read(self._rep_r, 1 << 16)
        if not chunk:
            self.ended = True
            raise Ended(f"the preloaded stage process ended (exit status {self.proc.wait()})")
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        out = []
        for line in lines:
            msg = json.loads(line)
            if "exited" in msg:
                self.exited[msg["exited"]] = (msg["status"], msg["maxrss_kib"] / 1024)
            else:
                out.append(msg)
        return out

    def _next_reply(self) -> dict:
        while True:
            for msg in self._messages(None):
                return msg  # one request is in flight at a time: at most one non-exit reply

    def spawn(self, argv: list[str], cwd: str, env: dict[str, str]) -> int:
        """Fork ``argv`` (script and arguments) in ``cwd`` with ``env`` added; the child's pid, which is
        also its process group's and session's."""
        if self.ended:
            raise Ended("the preloaded stage process has ended")
        if not self._ready:
            self._ready = bool(self._next_reply().get("ready"))
        try:
            os.write(self._req_w, (json.dumps({"argv": argv, "cwd": cwd, "env": env}) + "\n").encode())
        except BrokenPipeError:
            self.ended = True
            raise Ended(f"the preloaded stage process ended (exit status {self.proc.wait()})") from None
        reply = self._next_reply()
        if "pid" not in reply:  # fork failed (out of memory, process limit)
            raise Ended(f"the preloaded stage process could not fork: {reply.get('error')}")
        return int(reply["pid"])

    def poll(self, pid: int) -> tuple[int, float] | None:
        """``(exit status, peak RSS in MiB)`` once ``pid`` has exited, else None (never blocks).  Should
        the preloaded process be killed, a child's status is lost with it: once the child is gone too,
        its status reads as killed (:data:`LOST`)."""
        if pid not in self.exited and not self.ended:
            with contextlib.suppress(Ended):
                self._messages(0)
        if pid not in self.exited and self.ended and not process_alive(pid):
            return LOST, 0.0
        return self.exited.pop(pid, None)

    def close(self) -> None:
        """End the preloaded process (its running children are not touched)."""
        for fd in (self._req_w, self._rep_r):
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


# --------------------------------------------------------------------------- the preloaded process


def _reply(fd: int, msg: dict) -> bool:
    """Send ``msg``; False when nobody reads replies any more (the runner has closed its end or is gone)."""
    try:
        os.write(fd, (json.dumps(msg) + "\n").encode())
    except BrokenPipeError:
        return False
    return True


def _finalize() -> None:
    """What the interpreter does at exit before it is gone, in its order: wait for the non-daemon threads
    and run threading's exit hooks (an executor's shutdown: joblib's loky workers are told to stop there),
    then the :mod:`atexit` functions (multiprocessing's, which join the workers).  The other order leaves
    multiprocessing waiting on workers nobody stopped until their idle timeout (300 s: measured on a
    dSprites evaluation, 75 -> 329 s)."""
    threading._shutdown()  # type: ignore[attr-defined]  (Py_FinalizeEx's first step)
    atexit._run_exitfuncs()


def _run_child(request: dict, close_fds: tuple[int, ...]) -> None:
    """In the forked child: become ``python script ARGS`` and never return."""
    status = 1
    try:
        for fd in close_fds:
            os.close(fd)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # what the preloaded process ignores
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(request["cwd"])
        os.environ.update(request["env"])
        script = request["argv"][0]
        sys.argv = list(request["argv"])
        sys.path[0] = os.path.dirname(os.path.abspath(script))  # as `python script` sets it
        try:
            runpy.run_path(script, run_name="__main__")
            status = 0
        except SystemExit as exc:  # the interpreter's rules for sys.exit's argument
            if exc.code is None:
                status = 0
            elif isinstance(exc.code, int):
                status = exc.code
            else:
                print(exc.code, file=sys.stderr)
                status = 1
        except KeyboardInterrupt:
            traceback.print_exc()
            status = 128 + signal.SIGINT
        except BaseException:  # noqa: BLE001  (any other exception: its traceback, status 1, as python)
            traceback.print_exc()
        _finalize()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status & 0xFF)


def serve(req_fd: int, rep_fd: int, scripts_dir: Path) -> int:
    """The preloaded process: import :func:`preload_modules` of ``scripts_dir`` (here, not in the runner,
    which need not import them), then fork a child per request until end-of-file.
    It ignores SIGINT and SIGTERM (a scheduler's cancel signals every process of a job): the runner
    stops the stages, and closing the request pipe ends this process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for name in preload_modules(scripts_dir):
        with contextlib.suppress(Exception):  # a module that fails to import fails its stage, in the child
            importlib.import_module(name)
    children: set[int] = set()
    buf = b""
    open_ = _reply(rep_fd, {"ready": True})  # the runner may have finished while this process imported
    while open_ or children:
        if open_:
            readable, _, _ = select.select([req_fd], [], [], POLL_S)
            if readable:
                chunk = os.read(req_fd, 1 << 16)
                open_ = bool(chunk)
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    request = json.loads(line)
                    sync_r, sync_w = os.pipe()
                    try:
                        pid = os.fork()
                    except OSError as exc:
                        os.close(sync_r)
                        os.close(sync_w)
                        open_ = _reply(rep_fd, {"error": str(exc)}) and open_
                        continue
                    if pid == 0:
                        os.setsid()
                        os.close(sync_w)  # the session exists: the runner may signal its group now
                        _run_child(request, (req_fd, rep_fd, sync_r))
                    os.close(sync_w)
                    os.read(sync_r, 1)  # end-of-file once the child has its session
                    os.close(sync_r)
                    children.add(pid)
                    open_ = _reply(rep_fd, {"pid": pid}) and open_
        else:
            select.select([], [], [], POLL_S)
        for pid in list(children):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done:
                children.discard(pid)
                _reply(rep_fd, {"exited": pid, "status": os.waitstatus_to_exitcode(status),
                                "maxrss_kib": usage.ru_maxrss})  # (unread once the runner is gone)
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
