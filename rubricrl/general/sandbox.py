"""Run untrusted Python (a model's code) in a separate, locked-down process.

`run(program)` runs the program with `sys.executable -I` (isolated mode: PYTHON* variables, the user site-packages
and the script's folder on sys.path are all ignored) in a fresh working folder. The strongest set-up the host
permits is chosen once per process, by running an empty program under each candidate in turn (and, where the
process count rests on a user namespace, a program that forks up to the limit); `isolation()` tells which one is in
use, `describe()` says it in one line (printed once when chosen, and in the general suite's report).

What each run gets, and the limits of each guarantee (`limits`: rubricrl.config.SandboxParams, general.sandbox):

- Own process and session. A crash, `os._exit` or an endless loop cannot touch the caller. At the end (exit or the
  wall-clock timeout) every process of the run is killed (SIGKILL): its process group, then every process in its
  cgroup and, with an own uid, every process of that uid; the last two also catch children that left the group
  (setsid, double fork).
- Memory and processes of the run as a whole. "cgroup_v2" / "cgroup_v1": where the caller can make a cgroup (root,
  or a delegated cgroup v2 folder whose children may have the memory and pids controllers), the run gets one of its
  own, which it joins before exec: `memory_mb` for all its processes together (v2 memory.max, no swap; v1
  memory.limit_in_bytes and memsw), page cache and tmpfs included, and pids.max = `max_processes`. A run over the
  memory limit loses a process to the kernel's OOM killer and its status is "memory". "rlimit_split": without a
  cgroup, RLIMIT_NPROC = `max_processes` where it counts this run's processes only (an own uid; or a new user
  namespace, Linux >= 5.14, which the probe checks by forking to the limit), and every process gets RLIMIT_AS =
  memory_mb / max_processes, so together they stay under memory_mb. "per_process": neither (a non-root caller
  without user namespaces): RLIMIT_AS = memory_mb per process, and n processes can hold n times it.
- Per process as well (setrlimit): CPU time `cpu_s` (SIGXCPU, SIGKILL one second later), address space (memory_mb,
  or its share above; an allocation past it raises MemoryError), no core dumps, 64 open files, files written at
  most 16 MiB (this also caps the captured output). Processes and threads count alike against max_processes.
- Files. "mount_namespace" (root, or a non-root caller in a new user namespace): the child's own mount namespace
  puts one fresh tmpfs (`files_mb`, `max_files` files and folders, nosuid, nodev) on the working folder (also HOME);
  it holds the program, TMPDIR (also TEMP, TMP, Python's tempfile default), which is bind-mounted over /tmp and
  /var/tmp, and a folder bind-mounted over /dev/shm. Every write to those paths, absolute ones included, lands in
  that tmpfs, which vanishes with the namespace when the run's last process ends (exit, timeout, kill, even a dead
  caller). "owner_sweep" (an own uid without a mount namespace): the working folder, with TMPDIR inside, is deleted
  afterwards, and so is every entry the run's uid owns in /tmp, /var/tmp, /dev/shm and in the world-writable
  folders inside them (the uid is fresh, so what it owns is the run's, and its processes are dead by then); files
  in world-writable folders elsewhere are not found, and nothing caps their number. "tmpdir_only" (neither): only
  the working folder and TMPDIR are deleted; a write to an absolute /tmp path outlives the run (it belongs to the
  caller's uid, so nothing tells it apart from the caller's own files).
- Environment: PATH, HOME, TMPDIR, TEMP, TMP and LANG only; nothing of the caller's environment (tokens, keys) is
  passed. stdin is /dev/null, no other file descriptor is inherited. stdout and stderr go to one unnamed file of
  the caller; only its last 4 KiB are read, `detail` is its last line (200 chars).
- No network. Preferred: a new, empty network namespace (libc `unshare(CLONE_NEWNET)`), whose only interface is a
  loopback that is down, so every connect (127.0.0.1 and the host's listening sockets included) fails with
  ENETUNREACH and no DNS query leaves. It needs CAP_SYS_ADMIN (root outside a restricted container); a non-root
  caller gets it inside a new user namespace where the kernel allows those. Fallback when neither works: the program
  runs under a bootstrap that makes `bind`, `connect`, `connect_ex`, `sendto`, `sendmsg` of `socket.socket` and the
  name look-ups of `socket` raise PermissionError. That stops ordinary networking code (socket, urllib,
  http.client, requests), but NOT code that goes around the `socket` module (`_socket`, ctypes, a subprocess
  running curl).
- Own uid (when the caller is root): after the cgroup, the namespaces and the limits, the child drops to a fresh
  random uid/gid (no account, no files, no supplementary groups), which removes every capability, and sets
  no_new_privs (setuid binaries such as su grant nothing). It owns only its working folder, so the rest of the file
  system is as closed to it as to any stranger: deleting or changing the project's or root's files fails with
  PermissionError. It can still read world-readable files. Runs in parallel cannot signal or read one another.
  When the interpreter lies under a folder other users cannot enter (pyenv in /root), the mount namespace also
  covers that folder with an empty tmpfs holding bind mounts of the interpreter's folders only (the rest, /root's
  dot files, is hidden). Without root the program runs as the caller's user and can change whatever the caller can
  outside the paths above.

Not covered: the process-id namespace is shared (the program sees other processes in /proc, command lines
included), there is no seccomp filter, and nothing guards against kernel exploits: for a determined attacker use a
VM or a container runtime built for that.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import math
import os
import resource
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from rubricrl.core.errors import SandboxError

if TYPE_CHECKING:
    from rubricrl.config import SandboxParams

Status = Literal["passed", "failed", "timeout", "memory", "error"]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000
_MS_NOSUID = 0x2
_MS_NODEV = 0x4
_MS_BIND = 0x1000
_MS_REC = 0x4000
_MS_PRIVATE = 1 << 18
_PR_SET_NO_NEW_PRIVS = 38
_LIBC = ctypes.CDLL(None, use_errno=True)

# Far above real accounts and the usual subordinate-id ranges of rootless containers (100000+).
_UID_LOW, _UID_HIGH = 1_000_000_000, 2_000_000_000
_NOFILE = 64
_FSIZE = 16 * 2**20
_TAIL_BYTES = 4096
_DETAIL_CHARS = 200
_SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")  # the folders every user can write to, covered or swept
_KILL_ROUNDS = 2000  # SIGKILL rounds (1 ms apart) to empty a run's cgroup before it counts as a failure

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

# Passes only where the process limit counts this run alone: max_processes - 1 children start, the next fork fails.
_NPROC_PROBE = """\
import os, signal, sys
for _ in range({limit} - 1):
    if os.fork() == 0:
        signal.pause()
try:
    child = os.fork()
except BlockingIOError:
    sys.exit(0)
if child == 0:
    signal.pause()
sys.exit(1)
"""


@dataclass(frozen=True)
class SandboxResult:
    """passed: exit status 0 within every limit; detail: why not (the last output line, or the limit hit)."""

    passed: bool
    status: Status
    detail: str


@dataclass(frozen=True)
class _Limits:
    """The run's limits (rubricrl.config.SandboxParams' fields)."""

    memory_mb: int
    max_processes: int
    files_mb: int
    max_files: int


_PROBE_LIMITS = _Limits(memory_mb=512, max_processes=3, files_mb=16, max_files=64)


@dataclass(frozen=True)
class _Cgroups:
    """Where a run's cgroup is made: v2, one folder whose children get the memory and pids controllers; v1, a folder
    of the memory hierarchy and, where one is mounted, of the pids hierarchy."""

    version: Literal[1, 2]
    memory: str
    pids: str | None = None


@dataclass(frozen=True)
class _Plan:
    """One isolation set-up: namespaces, uid, cgroup and which limit bounds the processes together."""

    namespaces: int  # CLONE_* flags for unshare(2); NEWNET: no network (else the socket bootstrap); NEWNS: private files
    own_uid: bool
    # (folder other users cannot enter, interpreter folders in it to bind-mount back): needs CLONE_NEWNS
    reexpose: tuple[tuple[str, tuple[str, ...]], ...] = ()
    map_user: bool = False  # a non-root caller's new user namespace: map its uid and gid (files need an owner there)
    cgroup: _Cgroups | None = None  # each run gets a cgroup under these folders
    nproc: bool = False  # RLIMIT_NPROC counts this run's processes only (own uid, or checked by _NPROC_PROBE)


def run(program: str, timeout_s: float = 5.0, limits: SandboxParams | None = None,
        cpu_s: int | None = None) -> SandboxResult:
    """Run `program` (Python source) in the sandbox; `limits` defaults to general.sandbox's typed defaults,
    `cpu_s` to `timeout_s` rounded up."""
    if limits is None:
        from rubricrl.config import SandboxParams

        limits = SandboxParams()
    cpu = cpu_s if cpu_s is not None else max(1, math.ceil(timeout_s))
    own = _Limits(limits.memory_mb, limits.max_processes, limits.files_mb, limits.max_files)
    return _run(program, _plan(), timeout_s, own, cpu)


def isolation() -> dict[str, bool | str]:
    """Which mechanisms protect this host's runs (the module docstring says what each covers)."""
    return _isolation(_plan())


def describe() -> str:
    """`isolation()` in one line, for logs and reports."""
    return _describe(_plan())


def _isolation(plan: _Plan) -> dict[str, bool | str]:
    return {
        "network_namespace": bool(plan.namespaces & _CLONE_NEWNET),
        "own_uid": plan.own_uid,
        "interpreter_reexposed": bool(plan.reexpose),
        "files": "mount_namespace" if plan.namespaces & _CLONE_NEWNS else "owner_sweep" if plan.own_uid
        else "tmpdir_only",
        "memory": f"cgroup_v{plan.cgroup.version}" if plan.cgroup else "rlimit_split" if plan.nproc else "per_process",
    }


def _describe(plan: _Plan) -> str:
    got = _isolation(plan)
    files = {"mount_namespace": "private tmpfs for its folder, TMPDIR, /tmp, /var/tmp, /dev/shm",
             "owner_sweep": "its folder deleted, its uid's files swept from /tmp, /var/tmp, /dev/shm",
             "tmpdir_only": "its folder and TMPDIR deleted, absolute /tmp paths NOT cleaned"}[got["files"]]
    memory = {"cgroup_v2": "cgroup v2 for all its processes", "cgroup_v1": "cgroup v1 for all its processes",
              "rlimit_split": "RLIMIT_NPROC + RLIMIT_AS split over the processes",
              "per_process": "RLIMIT_AS per process only (processes together unbounded)"}[got["memory"]]
    return (f"{'no network (namespace)' if got['network_namespace'] else 'socket calls refused (no namespace)'}; "
            f"{'own uid' if got['own_uid'] else 'caller uid'}; files: {files}; memory: {memory}")


@functools.cache
def _plan() -> _Plan:
    """The strongest candidate under which an empty program runs: probing is the only reliable test
    (containers and kernels differ in what they allow root or users to unshare, mount or make in cgroups)."""
    for plan in _candidates():
        if not _starts(plan, ""):
            continue
        if not plan.nproc and not plan.cgroup and plan.namespaces & _CLONE_NEWUSER:
            counted = replace(plan, nproc=True)
            if _starts(counted, _NPROC_PROBE.format(limit=_PROBE_LIMITS.max_processes)):
                plan = counted
        print(f"sandbox: {_describe(plan)}", file=sys.stderr)
        return plan
    raise SandboxError("the sandbox cannot start a Python process on this host")


def _starts(plan: _Plan, program: str) -> bool:
    try:
        return _run(program, plan, 30.0, _PROBE_LIMITS, 30).passed
    except OSError:  # the host refused the run's cgroup
        return False


def _candidates() -> list[_Plan]:
    if os.geteuid() != 0:
        isolated = [_Plan(_CLONE_NEWUSER | _CLONE_NEWNS | _CLONE_NEWNET, own_uid=False, map_user=True),
                    _Plan(_CLONE_NEWUSER | _CLONE_NEWNET, own_uid=False), _Plan(0, own_uid=False)]
    else:
        hidden = _hidden_interpreter_folders()
        isolated = [_Plan(_CLONE_NEWNET | _CLONE_NEWNS, own_uid=True, reexpose=hidden, nproc=True),
                    _Plan(_CLONE_NEWNET, own_uid=True, nproc=True), _Plan(0, own_uid=True, nproc=True),
                    _Plan(0, own_uid=False)]
    cgroups = _cgroup_parents()
    return [replace(plan, cgroup=c) for plan in isolated for c in ([cgroups] if cgroups else []) + [None]]


def _interpreter_folders() -> list[str]:
    """The folders Python needs to start: its base installation, the virtual environment, the executable's folder
    (outermost first, each once)."""
    found = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, os.path.dirname(sys.executable))})
    return [f for i, f in enumerate(found) if not any(f.startswith(g + "/") for g in found[:i])]


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


def _cgroup_parents() -> _Cgroups | None:
    """This process's own cgroup folders, where a run's cgroup can go: v2 when its controllers include memory and
    pids and they are (or can be) on for child cgroups, else v1 when a memory hierarchy is mounted; None without.
    Whether mkdir and the limits work there is left to the probe."""
    own: dict[str, str] = {}  # controller ("" for v2) -> this process's cgroup path
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    mounts: dict[str, tuple[str, str]] = {}  # controller ("" for v2) -> (mount root, mount point)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        fstype, options = fields[fields.index("-") + 1], fields[fields.index("-") + 3]
        keys = [""] if fstype == "cgroup2" else [o for o in options.split(",") if o in ("memory", "pids")] \
            if fstype == "cgroup" else []
        for key in keys:
            mounts.setdefault(key, (fields[3], fields[4]))

    def folder(key: str) -> str | None:
        if key not in own or key not in mounts:
            return None
        root, point = mounts[key]
        inside = os.path.relpath(own[key], root)
        found = os.path.normpath(os.path.join(point, inside))
        return found if not inside.startswith("..") and os.path.isdir(found) else None

    unified = folder("")
    if unified and {"memory", "pids"} <= set(Path(unified, "cgroup.controllers").read_text().split()):
        subtree = Path(unified, "cgroup.subtree_control")
        try:
            if not {"memory", "pids"} <= set(subtree.read_text().split()):
                subtree.write_text("+memory +pids")  # refused (EBUSY) where processes sit in a non-root cgroup
            return _Cgroups(2, unified)
        except OSError:
            pass
    memory = folder("memory")
    return _Cgroups(1, memory, folder("pids")) if memory else None


@contextlib.contextmanager
def _cgroup(parents: _Cgroups | None, limits: _Limits) -> Iterator[tuple[str, ...]]:
    """The run's own cgroup folders (none without `parents`; the memory one first), limited before the program
    joins them; afterwards every process left in them is killed and the folders are removed."""
    if parents is None:
        yield ()
        return
    name = f"rubricrl-sandbox-{secrets.token_hex(8)}"
    memory, processes = str(limits.memory_mb * 2**20), str(limits.max_processes)
    made: list[str] = []
    try:
        made.append(os.path.join(parents.memory, name))
        os.mkdir(made[-1])
        if parents.version == 2:
            _set(made[-1], {"memory.max": memory, "pids.max": processes}, {"memory.swap.max": "0"})
        else:
            _set(made[-1], {"memory.limit_in_bytes": memory}, {"memory.memsw.limit_in_bytes": memory})
            if parents.pids:
                made.append(os.path.join(parents.pids, name))
                os.mkdir(made[-1])
                _set(made[-1], {"pids.max": processes}, {})
        yield tuple(made)
    finally:
        for folder in made:
            if os.path.isdir(folder):
                _empty_and_remove(folder)


def _set(folder: str, settings: dict[str, str], where_present: dict[str, str]) -> None:
    """Write cgroup settings; `where_present` ones only where the kernel has them (swap accounting)."""
    for name, value in settings.items():
        Path(folder, name).write_text(value)
    for name, value in where_present.items():
        if Path(folder, name).exists():
            Path(folder, name).write_text(value)


def _empty_and_remove(folder: str) -> None:
    """SIGKILL every process in a run's cgroup until none is left (a forking one may add more), then rmdir it."""
    for _ in range(_KILL_ROUNDS):
        pids = Path(folder, "cgroup.procs").read_text().split()
        if not pids:
            try:
                os.rmdir(folder)
                return
            except OSError as exc:  # EBUSY: the last exits are still being accounted
                if exc.errno != errno.EBUSY:
                    raise
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.001)
    raise SandboxError(f"{folder}: processes of a sandbox run survived {_KILL_ROUNDS} rounds of SIGKILL")


def _run(program: str, plan: _Plan, timeout_s: float, limits: _Limits, cpu_s: int) -> SandboxResult:
    """`run` under a given plan (also the probe of `_plan`); a plan the host refuses gives "error", a cgroup it
    refuses OSError."""
    uid = _UID_LOW + secrets.randbelow(_UID_HIGH - _UID_LOW) if plan.own_uid else None
    with (tempfile.TemporaryDirectory(prefix="rubricrl-sandbox-") as work, tempfile.TemporaryFile() as out,
          _cgroup(plan.cgroup, limits) as cgroup):
        Path(work, "main.py").write_text(program, encoding="utf-8")
        tmp = Path(work, "tmp")
        tmp.mkdir()
        if uid is not None:
            os.chown(work, uid, uid)
            os.chown(tmp, uid, uid)
        no_net = plan.namespaces & _CLONE_NEWNET
        argv = [sys.executable, "-I", *([] if no_net else ["-c", _NO_SOCKET_BOOTSTRAP]), "main.py"]
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp),
               "LANG": "C.UTF-8"}
        try:
            proc = subprocess.Popen(
                argv,
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=functools.partial(_isolate, plan, uid, cpu_s, limits, work, program, cgroup),
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
            if uid is not None and not plan.namespaces & _CLONE_NEWNS:
                _sweep(uid)
        return _result(proc.returncode, timed_out, timeout_s, _tail(out), _oom_killed(cgroup))


def _isolate(plan: _Plan, uid: int | None, cpu_s: int, limits: _Limits, work: str, program: str,
             cgroup: tuple[str, ...]) -> None:
    """The child between fork and exec, still as the caller: the cgroup, namespaces, mounts and limits need
    privileges that the uid drop, last, takes away for good."""
    for folder in cgroup:
        _write(os.path.join(folder, "cgroup.procs"), str(os.getpid()))
    caller = (os.getuid(), os.getgid())
    if plan.namespaces:
        _check(_LIBC.unshare(plan.namespaces), "unshare")
    if plan.map_user:
        _write("/proc/self/uid_map", f"{caller[0]} {caller[0]} 1")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/gid_map", f"{caller[1]} {caller[1]} 1")
    if plan.namespaces & _CLONE_NEWNS:
        _check(_LIBC.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")
        _private_files(work, program, (uid, uid) if uid is not None else caller, limits, plan.reexpose)
    # A cgroup bounds the processes together; else, where the process count is the run's own, each gets a share.
    split = plan.nproc and not plan.cgroup
    memory = limits.memory_mb // limits.max_processes if split else limits.memory_mb
    rlimits = {
        resource.RLIMIT_CPU: (cpu_s, cpu_s + 1),
        resource.RLIMIT_AS: (memory * 2**20,) * 2,
        resource.RLIMIT_CORE: (0, 0),
        resource.RLIMIT_NOFILE: (_NOFILE, _NOFILE),
        resource.RLIMIT_FSIZE: (_FSIZE, _FSIZE),
    }
    if plan.nproc:
        rlimits[resource.RLIMIT_NPROC] = (limits.max_processes, limits.max_processes)
    for kind, limit in rlimits.items():
        resource.setrlimit(kind, limit)
    _check(_LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl")
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)


def _write(path: str, text: str) -> None:
    """One write(2) of a short text, as /proc/self/uid_map requires (and no Python I/O stack in the forked child)."""
    handle = os.open(path, os.O_WRONLY)
    try:
        if os.write(handle, text.encode()) != len(text.encode()):
            raise OSError(errno.EIO, f"{path}: short write")
    finally:
        os.close(handle)


def _private_files(work: str, program: str, owner: tuple[int, int], limits: _Limits,
                   reexpose: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """In the child's new mount namespace: a fresh tmpfs on the working folder holds the program, tmp/ (TMPDIR,
    bind-mounted over /tmp and /var/tmp) and shm/ (over /dev/shm); the working folder's path is bound back where a
    cover hid it (it usually lies in /tmp). Everything in it goes when the namespace's last process ends."""
    options = f"size={limits.files_mb}m,nr_inodes={limits.max_files},mode=0700,uid={owner[0]},gid={owner[1]}"
    _check(_LIBC.mount(b"tmpfs", work.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options.encode()),
           f"mount tmpfs {work}")
    main = Path(work, "main.py")
    main.write_text(program, encoding="utf-8")
    main.chmod(0o644)
    for sub in ("tmp", "shm"):
        Path(work, sub).mkdir()
        Path(work, sub).chmod(0o1777)
    root = os.open(work, os.O_PATH)
    handles = {sub: os.open(Path(work, sub), os.O_PATH) for sub in ("tmp", "shm")}
    if reexpose:
        _reexpose(reexpose)
    # The interpreter itself may lie under a covered folder (a checkout and its .venv in /tmp): bound back below.
    inside = [f for f in _interpreter_folders() if any(f == t or f.startswith(t + "/") for t in _SHARED_TMP)]
    kept = {f: os.open(f, os.O_PATH) for f in inside}
    for target, sub in (("/tmp", "tmp"), ("/var/tmp", "tmp"), ("/dev/shm", "shm")):
        if os.path.isdir(target):
            _bind(handles[sub], target)
    for folder, handle in kept.items():
        os.makedirs(folder, exist_ok=True)
        _bind(handle, folder)
        os.close(handle)
    if not os.path.exists(work) or not os.path.samestat(os.stat(work), os.fstat(root)):
        os.makedirs(work, exist_ok=True)
        _bind(root, work)
    os.chdir(work)
    for handle in (root, *handles.values()):
        os.close(handle)


def _reexpose(hidden: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """In the child's new mount namespace: cover each closed folder with an empty tmpfs and bind-mount
    the interpreter's folders back into it, through handles opened before the cover hides them."""
    for parent, folders in hidden:
        handles = [os.open(folder, os.O_PATH) for folder in folders]
        _check(_LIBC.mount(b"tmpfs", parent.encode(), b"tmpfs", 0, b"mode=0755"), f"mount tmpfs {parent}")
        for folder, handle in zip(folders, handles):
            os.makedirs(folder)
            _bind(handle, folder)
            os.close(handle)


def _bind(handle: int, target: str) -> None:
    """Bind-mount the folder behind an O_PATH handle on `target`."""
    source = f"/proc/self/fd/{handle}".encode()
    _check(_LIBC.mount(source, target.encode(), None, _MS_BIND, None), f"bind {target}")


def _check(ret: int, what: str) -> None:
    if ret != 0:
        errno_ = ctypes.get_errno()
        raise OSError(errno_, f"{what}: {os.strerror(errno_)}")


def _kill_leftovers(pid: int, uid: int | None) -> None:
    """SIGKILL the program's process group and, with an own uid, every process of that uid: a helper
    running as that uid sends kill(-1), which reaches exactly those (setsid'd ones included). The run's
    cgroup, if any, is emptied when it is removed."""
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


def _sweep(uid: int) -> None:
    """Without a private mount namespace: delete every entry the run's fresh uid owns in the shared folders and the
    world-writable folders inside them (the only places besides its own folder where it can create anything), never
    following a link. Its processes are all dead by now, so nothing is created behind the sweep."""
    todo = [folder for folder in _SHARED_TMP if os.path.isdir(folder)]
    while todo:
        with os.scandir(todo.pop()) as entries:
            for entry in entries:
                try:
                    info = entry.stat(follow_symlinks=False)
                    if info.st_uid == uid:
                        if stat.S_ISDIR(info.st_mode):
                            shutil.rmtree(entry.path)
                        else:
                            os.unlink(entry.path)
                    elif stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH and info.st_mode & stat.S_IXOTH:
                        todo.append(entry.path)
                except FileNotFoundError:  # another user removed it meanwhile
                    continue


def _oom_killed(cgroup: tuple[str, ...]) -> bool:
    """Whether the kernel's OOM killer killed a process of the run at its cgroup's memory limit."""
    for name in ("memory.events", "memory.oom_control"):  # v2, v1 (Linux >= 4.13 counts oom_kill)
        path = Path(cgroup[0], name) if cgroup else None
        if path is not None and path.exists():
            counts = dict(line.split() for line in path.read_text().splitlines() if line.strip())
            return int(counts.get("oom_kill", 0)) > 0
    return False


def _tail(out: IO[bytes]) -> str:
    size = out.seek(0, os.SEEK_END)
    out.seek(max(0, size - _TAIL_BYTES))
    return out.read().decode("utf-8", "replace")


def _result(returncode: int, timed_out: bool, timeout_s: float, output: str, oom_killed: bool) -> SandboxResult:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    last = lines[-1][:_DETAIL_CHARS] if lines else ""
    if timed_out:
        return SandboxResult(False, "timeout", f"still running after {timeout_s:g} s (wall clock)")
    if returncode == 0:
        return SandboxResult(True, "passed", last)
    if oom_killed:
        return SandboxResult(False, "memory", "over the run's memory limit (cgroup): the kernel killed a process")
    if returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return SandboxResult(False, "timeout", "CPU-time limit")
    if "MemoryError" in last:
        return SandboxResult(False, "memory", last)
    if returncode < 0:
        return SandboxResult(False, "error", f"killed by signal {-returncode}")
    return SandboxResult(False, "failed", last)
