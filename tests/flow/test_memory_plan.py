"""README "Memory" is tools/memory_plan.py's output for the shipped configs, and the plan is the reason for the
production layout: SFT of the 7B does not fit one GPU, every stage as configured fits an 80 GB GPU."""

from pathlib import Path

from tools import memory_plan

ROOT = Path(__file__).resolve().parents[2]


def test_readme_memory_table_is_the_plan_of_the_shipped_configs():
    table = memory_plan.table(memory_plan.plan(ROOT))
    assert table in (ROOT / "README.md").read_text(), "README's memory table differs: python -m tools.memory_plan"


def test_the_production_layout_fits_and_one_gpu_sft_would_not():
    rows = {(r.stage, r.gpus): r for r in memory_plan.plan(ROOT)}
    assert not rows["sft", 1].fits and rows["sft", 8].fits  # why sft relaunches under accelerate
    assert all(r.fits for key, r in rows.items() if key != ("sft", 1))
    assert memory_plan.param_count("Qwen/Qwen2.5-7B-Instruct") == 7_615_616_512  # the published 7.62B


def test_the_plan_follows_the_configs(tmp_path):
    import shutil

    for rel in ("params.yaml", "configs"):
        (shutil.copytree if (ROOT / rel).is_dir() else shutil.copy)(ROOT / rel, tmp_path / rel)
    text = (tmp_path / "configs/production.yaml").read_text()
    (tmp_path / "configs/production.yaml").write_text(text.replace("  batch_size: 1           # one 4,096",
                                                                   "  batch_size: 2           # one 4,096"))
    distill = next(r for r in memory_plan.plan(tmp_path) if r.stage == "distill")
    assert not distill.fits and round(distill.per_gpu_gb) == 87
