"""The resume journal and folder (rubricrl.core.resume): what a kill leaves is read back, a torn line dropped."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from rubricrl.core.crashpoint import ENV
from rubricrl.core.resume import Journal, ResumeDir


def test_map_produces_fixed_chunks_and_a_rerun_makes_only_the_missing_ones(tmp_path):
    ids = [f"t{i}" for i in range(10)]
    calls: list[list[int]] = []

    def produce(ix):
        calls.append(ix)
        if len(calls) == 3:  # the third chunk: killed
            raise KeyboardInterrupt
        return [{"id": ids[i], "answer": i * i} for i in ix]

    journal = Journal(tmp_path / "j.jsonl")
    try:
        journal.map(ids, produce, 4)
    except KeyboardInterrupt:
        pass
    assert calls == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    calls.clear()
    again = Journal(tmp_path / "j.jsonl")
    rows = again.map(ids, lambda ix: [{"id": ids[i], "answer": i * i} for i in ix], 4)
    assert [r["answer"] for r in rows] == [i * i for i in range(10)]
    assert again.read_back == 8  # the two finished chunks; the third is made whole, as the first run would have


def test_a_kill_mid_append_leaves_a_torn_line_that_the_next_open_drops(tmp_path):
    path = tmp_path / "j.jsonl"
    script = ("import sys; from rubricrl.core.resume import Journal\n"
              "j = Journal(sys.argv[1])\n"
              "j.add([{'id': 'a', 'x': 1}, {'id': 'b', 'x': 2}])\n"
              "j.add([{'id': 'c', 'x': 3}, {'id': 'd', 'x': 'a long value ' * 20}])\n")
    proc = subprocess.run([sys.executable, "-c", script, str(path)], env={**os.environ, ENV: "journal:2"})
    assert proc.returncode == -9
    assert not path.read_bytes().endswith(b"\n")  # the second append, cut in the middle
    journal = Journal(path)
    assert journal.torn == 1 and set(journal.rows) <= {"a", "b", "c"} and {"a", "b"} <= set(journal.rows)
    assert path.read_bytes().endswith(b"\n")  # cut back to the last whole line
    assert all(json.loads(line) for line in path.read_text().splitlines())
    journal.add([{"id": "d", "x": 4}])
    assert Journal(path).rows["d"] == {"id": "d", "x": 4}


def test_a_resume_folder_of_another_stamp_is_started_over(tmp_path):
    first = ResumeDir("eval_task", {"max_new_tokens": 200}, ["t1"], root=tmp_path)
    first.journal("base").add([{"id": "t1", "response": "{}"}])
    assert not first.resumed
    same = ResumeDir("eval_task", {"max_new_tokens": 200}, ["t1"], root=tmp_path)
    assert same.resumed and same.journal("base").rows
    other = ResumeDir("eval_task", {"max_new_tokens": 100}, ["t1"], root=tmp_path)
    assert not other.resumed and not other.journal("base").rows
    other.clear()
    assert not (tmp_path / "eval_task").exists()
