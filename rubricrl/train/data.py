"""Training rows as a `datasets.Dataset`, fingerprinted by their content.

`Dataset.from_list` / `from_dict` fingerprint a new dataset by pickling its Arrow table through datasets' Hasher
(dill). On Python 3.12 with datasets 5.2 and dill 0.4.1 (the GPU image's Python and docker/Dockerfile.gpu's) that
fails (`PicklingError: Can't pickle <class 'MonthDayNano'>`), so SFT, GRPO and distillation build their datasets
here: the table straight from pyarrow, the fingerprint the sha256 of the rows' JSON, so the Hasher never sees the
table. Equal rows give equal fingerprints (datasets' cache keys stay stable across runs).
"""

from __future__ import annotations

import hashlib
import json


def fingerprint(rows: list[dict]) -> str:
    """The sha256 of the rows as canonical JSON (datasets takes any string as a fingerprint)."""
    return hashlib.sha256(json.dumps(rows, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def rows_dataset(rows: list[dict]):
    """A `datasets.Dataset` of `rows` (dicts with the same keys), built without hashing its table."""
    import pyarrow as pa
    from datasets import Dataset
    from datasets.table import InMemoryTable

    if not rows:
        raise ValueError("rows_dataset: no rows")
    return Dataset(InMemoryTable(pa.Table.from_pylist(rows)), fingerprint=fingerprint(rows))
