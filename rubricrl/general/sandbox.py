"""Run untrusted Python (a model's code) in a separate, locked-down process.

`run(program)` writes the program to a fresh temporary folder and runs it there with
`sys.executable -I` (isolated mode: PYTHON* variables, the user site-packages and the script's folder
on sys.path are all ignored). The strongest set-up the host permits is chosen once per process, by
running an empty program under each candidate in turn; `isolation()` tells which one is in use.

What each run gets, and the limits of each guarantee:

- Own process and session. A crash, `os._exit` or an endless loop cannot touch the caller. At the
  wall-clock timeout the whole process group is killed (SIGKILL), then, with an own uid (below), every
  process of that uid, which also catches children that left the group (setsid, double fork).
- Resource limits, per process (setrlimit; a limit is inherited by children but not shared with them):
  CPU time `cpu_s` (SIGXCPU, SIGKILL one second later), address space `memory_mb` (an allocation past
  it raises MemoryError), no core dumps, 64 open files, files written at most 16 MiB (this also caps
  the captured output). 32 processes per uid (RLIMIT_NPROC counts all processes of a uid, so it is a
  per-run limit only with an own uid, and only then is it set).
- Files: a fresh temporary folder is the working folder, HOME and TMPDIR; it is deleted afterwards
  whatever happens (exit, exception, timeout, a failed start).
- Environment: PATH, HOME, TMPDIR and LANG only; nothing of the caller's environment (tokens, keys)
  is passed. stdin is /dev/null, no other file descriptor is inherited. stdout and stderr go to one
  unnamed file of the caller; only its last 4 KiB are read, `detail` is its last line (200 chars).
- No network. Preferred: a new, empty network namespace (libc `unshare(CLONE_NEWNET)`), whose only
  interface is a loopback that is down, so every connect (127.0.0.1 and the host's listening sockets
  included) fails with ENETUNREACH and no DNS query leaves. It needs CAP_SYS_ADMIN (root outside a
  restricted container); a non-root caller gets it inside a new user namespace where the kernel allows
  those. Fallback when neither works: the program runs under a bootstrap that makes `bind`, `connect`,
  `connect_ex`, `sendto`, `sendmsg` of `socket.socket` and the name look-ups of `socket` raise
  PermissionError. That stops ordinary networking code (socket, urllib, http.client, requests), but
  NOT code that goes around the `socket` module (`_socket`, ctypes, a subprocess running curl).
- Own uid (when the caller is root): after the namespaces and limits, the child drops to a fresh
  random uid/gid (no account, no files, no supplementary groups), which removes every capability, and
  sets no_new_privs (setuid binaries such as su grant nothing). It owns only its working folder, so
  the rest of the file system is as closed to it as to any stranger: deleting or changing the
  project's or root's files fails with PermissionError. It can still read world-readable files and
  create files in world-writable folders such as /tmp (the sticky bit keeps it from deleting others'),
  each at most 16 MiB. Runs in parallel cannot signal or read one another. When the interpreter lies
  under a folder other users cannot enter (pyenv in /root), the child also gets a new mount namespace
  in which that folder is an empty tmpfs holding bind mounts of the interpreter's folders only (the
  rest, /root's dot files, is hidden). Without root the program runs as the caller's user and can
  change whatever the caller can.

Not covered: the process-id namespace is shared (the program sees other processes in /proc, command
lines included), there is no seccomp filter, and nothing guards against kernel exploits: for a
determined attacker use a VM or a container runtime built for that.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import resource
import secrets
import signal
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

Status = Literal["passed", "failed", "timeout", "memory", "error"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)

# Far above real accounts and the usual subordinate-id ranges of rootless containers (100000+).
_UID_LOW, _UID_HIGH = 1_000_000_000, 2_000_000_000
_NPROC = 32
_NOFILE = 64
_FSIZE = 16 * 2**20
_TAIL_BYTES = 4096
_DETAIL_CHARS = 200

# Runs main.py with the socket module's network calls refused: the fallback without a network namespace.
_NO_SOCKET_BOOTSTRAP = """\
import runpy, socket, sys
def refuse(*args, **kwargs):
    raise PermissionError("network access is disabled in this sandbox")
for name in ("bind", "connect", "connect_ex", "sendto", "sendmsg"):
    setattr(socket.socket, name, refuse)
for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr"):
    setattr(socket, name, refuse)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@dataclass(frozen=True)
class SandboxResult:
    """passed: exit status 0 within every limit; detail: why not (the last output line, or the limit hit)."""

    passed: bool
    status: Status
    detail: str


@dataclass(frozen=True)
class _Plan:
    """One isolation set-up: the namespaces to unshare and whether to drop to an own uid."""

    namespaces: int  # CLONE_* flags for unshare(2); without CLONE_NEWNET the socket bootstrap is used
    own_uid: bool
    # (folder other users cannot enter, interpreter folders in it to bind-mount back): needs CLONE_NEWNS
    reexpose: tuple[tuple[str, tuple[str, ...]], ...] = ()


def run(program: str, timeout_s: float = 5.0, memory_mb: int = 512, cpu_s: int | None = None) -> SandboxResult:
    """Run `program` (Python source) in the sandbox; `cpu_s` defaults to `timeout_s` rounded up."""
    cpu = cpu_s if cpu_s is not None else max(1, math.ceil(timeout_s))
    return _run(program, _plan(), timeout_s, memory_mb, cpu)


def isolation() -> dict[str, bool]:
    """Which mechanisms protect this host's runs (the rest of the module docstring says what each covers)."""
    plan = _plan()
    return {
        "network_namespace": bool(plan.namespaces & _CLONE_NEWNET),
        "own_uid": plan.own_uid,
        "interpreter_reexposed": bool(plan.reexpose),
    }


@functools.cache
def _plan() -> _Plan:
    """The strongest candidate under which an empty program runs: probing is the only reliable test
    (containers and kernels differ in what they allow root or users to unshare)."""
    for plan in _candidates():
        if _run("", plan, 30.0, 512, 30).passed:
            return plan
    raise RuntimeError("the sandbox cannot start a Python process on this host")


def _candidates() -> list[_Plan]:
    if os.geteuid() != 0:
        return [_Plan(_CLONE_NEWUSER | _CLONE_NEWNET, own_uid=False), _Plan(0, own_uid=False)]
    hidden = _hidden_interpreter_folders()
    full = _Plan(_CLONE_NEWNET | (_CLONE_NEWNS if hidden else 0), own_uid=True, reexpose=hidden)
    return [full, _Plan(0, own_uid=True), _Plan(0, own_uid=False)]


def _hidden_interpreter_folders() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The interpreter's folders that lie under a folder other users cannot enter, grouped by the
    topmost such folder: an own uid could not even start Python without bind-mounting them back."""
    needed = sorted(
        {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, os.path.dirname(sys.executable))}
    )
    groups: dict[str, list[str]] = {}
    for folder in needed:  # sorted: a folder comes before the folders inside it
        if any(folder.startswith(f"{kept}/") for kept_list in groups.values() for kept in kept_list):
            continue  # inside a folder already bind-mounted
        for parent in reversed(Path(folder).parents):  # from "/" down
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                groups.setdefault(str(parent), []).append(folder)
                break
    return tuple((parent, tuple(folders)) for parent, folders in groups.items())


def _run(program: str, plan: _Plan, timeout_s: float, memory_mb: int, cpu_s: int) -> SandboxResult:
    """`run` under a given plan (also the probe of `_plan`); a plan the host refuses gives "error"."""
    uid = _UID_LOW + secrets.randbelow(_UID_HIGH - _UID_LOW) if plan.own_uid else None
    with tempfile.TemporaryDirectory(prefix="rubricrl-sandbox-") as work, tempfile.TemporaryFile() as out:
        Path(work, "main.py").write_text(program, encoding="utf-8")
        if uid is not None:
            os.chown(work, uid, uid)
        no_net = plan.namespaces & _CLONE_NEWNET
        argv = [sys.executable, "-I", *([] if no_net else ["-c", _NO_SOCKET_BOOTSTRAP]), "main.py"]
        try:
            proc = subprocess.Popen(
                argv,
                cwd=work,
                env={"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8"},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(_isolate, plan, uid, cpu_s, memory_mb),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return SandboxResult(False, "error", f"sandbox did not start: {exc}"[:_DETAIL_CHARS])
        timed_out = False
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_leftovers(proc.pid, uid)
            proc.wait()
        return _result(proc.returncode, timed_out, timeout_s, _tail(out))


def _isolate(plan: _Plan, uid: int | None, cpu_s: int, memory_mb: int) -> None:
    """The child between fork and exec, still as the caller: namespaces and limits need privileges
    that the uid drop, last, takes away for good."""
    if plan.namespaces:
        _check(_LIBC.unshare(plan.namespaces), "unshare")
    if plan.reexpose:
        _reexpose(plan.reexpose)
    limits = {
        resource.RLIMIT_CPU: (cpu_s, cpu_s + 1),
        resource.RLIMIT_AS: (memory_mb * 2**20,) * 2,
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_NOFILE: (_NOFILE, _NOFILE),
        resource.RLIMIT_FSIZE: (_FSIZE, _FSIZE),
    }
    if uid is not None:
        limits[resource.RLIMIT_NPROC] = (_NPROC, _NPROC)
    for kind, limit in limits.items():
        resource.setrlimit(kind, limit)
    _check(_LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _reexpose(hidden: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """In the child's new mount namespace: cover each closed folder with an empty tmpfs and bind-mount
    the interpreter's folders back into it, through handles opened before the cover hides them."""
    _check(_LIBC.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
    for parent, folders in hidden:
        handles = [os.open(folder, os.O_PATH) for folder in folders]
        _check(_LIBC.mount(b"tmpfs", parent.encode(), b"tmpfs", 0, b"mode=0755"), f"mount tmpfs {parent}")
        for folder, handle in zip(folders, handles):
            os.makedirs(folder)
            source = f"/proc/self/fd/{handle}".encode()
            _check(_LIBC.mount(source, folder.encode(), None, _MS_BIND, None), f"bind {folder}")
            os.close(handle)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _kill_leftovers(pid: int, uid: int | None) -> None:
    """SIGKILL the program's process group and, with an own uid, every process of that uid: a helper
    running as that uid sends kill(-1), which reaches exactly those (setsid'd ones included)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    if uid is None:
        return
    helper = os.fork()
    if helper == 0:
        try:
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(helper, 0)


def _tail(out: IO[bytes]) -> str:
    size = out.seek(0, os.SEEK_END)
    out.seek(max(0, size - _TAIL_BYTES))
    return out.read().decode("utf-8", "replace")


def _result(returncode: int, timed_out: bool, timeout_s: float, output: str) -> SandboxResult:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = lines[-1][:_DETAIL_CHARS] if lines else ""
    if timed_out:
        return SandboxResult(False, "timeout", f"still running after {timeout_s:g} s (wall clock)")
    if returncode == 0:
        return SandboxResult(True, "passed", last)
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return SandboxResult(False, "timeout", "CPU-time limit")
    if "MemoryError" in last:
        return SandboxResult(False, "memory", last)
    if returncode < 0:
        return SandboxResult(False, "error", f"killed by signal {-returncode}")
    return SandboxResult(False, "failed", last)
