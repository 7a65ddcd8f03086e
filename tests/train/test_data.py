"""Training datasets are built with a content fingerprint: datasets' Hasher never pickles their Arrow table (it
fails on Python 3.12 with datasets 5.2 / dill 0.4.1), and `Dataset.from_list` is on no training path."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rubricrl.train.data import fingerprint, rows_dataset

ROOT = Path(__file__).resolve().parents[2]


def test_rows_come_back_intact_without_the_hasher(monkeypatch):
    import datasets.arrow_dataset as ad
    import datasets.fingerprint as fp

    def refuse(*a, **k):
        raise AssertionError("the table was hashed")

    monkeypatch.setattr(fp.Hasher, "hash", refuse)
    monkeypatch.setattr(ad, "generate_fingerprint", refuse)
    monkeypatch.setattr(ad.Dataset, "from_list", refuse)
    rows = [{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "{}"}], "task_id": "a"},
            {"messages": [{"role": "user", "content": "二"}, {"role": "assistant", "content": "null"}], "task_id": "b"}]
    ds = rows_dataset(rows)
    assert ds.to_list() == rows and len(ds) == 2
    assert ds._fingerprint == fingerprint(rows) == rows_dataset([dict(r) for r in rows])._fingerprint
    assert rows_dataset(rows[:1])._fingerprint != ds._fingerprint
    with pytest.raises(ValueError, match="no rows"):
        rows_dataset([])


def test_no_training_path_builds_a_dataset_that_hashes_its_table():
    """Every `datasets.Dataset` of the package comes from rows_dataset: no from_list / from_dict / from_pandas."""
    found = []
    for path in (ROOT / "rubricrl").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in {"from_list", "from_dict", "from_pandas",
                                                                  "from_generator"}:
                if isinstance(node.value, ast.Name) and node.value.id in {"Dataset", "IterableDataset"}:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found
    for rel in ("rubricrl/train/sft.py", "rubricrl/train/grpo.py", "rubricrl/release/distill.py"):
        assert "rows_dataset(" in (ROOT / rel).read_text(), rel
