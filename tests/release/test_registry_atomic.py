"""Registration all or nothing (issue 37 part 3): a registration (a candidate, or all of one candidate's exports)
killed before each of its registry writes in turn, then run again, leaves what an uninterrupted one leaves: one version per
weights (or bytes) hash, the same tags on each, the same aliases, no intent left; meanwhile no reader picks a
half-made version. A kill is the `killer` fixture of test_registry: the k-th MLflow client write raises instead of
happening, for every k."""

import hashlib
import json
from pathlib import Path

import pytest

from rubricrl.config import load_params
from rubricrl.flow.registry import candidate
from rubricrl.release import registry
from tests.release.test_registry import (N_TASKS, Killed, _store_copy, killer, project, register,  # noqa: F401
                                         set_evals)

NAME = "rubricrl-extractor"
RUN_TAGS = {"registering_run"}  # the run that registered: a rerun's own, so it differs by construction


def _state(params, models=(NAME,)) -> dict:
    """Per registered model: aliases, the intent left (if any), each version's tags but the run it came from."""
    c = registry.client(params.tracking)
    out = {}
    for m in models:
        if not c.search_registered_models(f"name = '{m}'"):
            out[m] = None
            continue
        rm = c.get_registered_model(m)
        out[m] = {"aliases": {a: str(v) for a, v in rm.aliases.items()}, "pending": rm.tags.get(registry.PENDING),
                  "versions": {str(v.version): {k: x for k, x in v.tags.items() if k not in RUN_TAGS}
                               for v in c.search_model_versions(f"name = '{m}'")}}
    return out


def _one_per_hash(state: dict, model: str, hash_tag: str) -> None:
    hashes = [tags.get(hash_tag) for tags in state[model]["versions"].values()]
    assert None not in hashes and len(hashes) == len(set(hashes)), hashes


def _list(project: Path, p, capsys) -> str:
    """`rubricrl registry list` on that store (it only reads)."""
    from rubricrl.cli.main import main

    params_file = project / f"{Path(p.tracking.uri).parent.name}.yaml"
    params_file.write_text((project / "params.yaml").read_text().replace(
        "sqlite:///" + str(project / "mlruns/mlflow.db"), p.tracking.uri))
    capsys.readouterr()
    main(["registry", "list", "--params", str(params_file)])
    return capsys.readouterr().out


def test_a_new_registration_killed_at_each_write_converges_with_its_rerun(project, killer, capsys):
    from rubricrl import tracking

    params = load_params(project / "params.yaml")
    cand = candidate(project, "grpo")
    tracking.setup(params.tracking)  # an empty store, copied for each kill (a new one migrates its schema: ~1.5 s)
    ref = _store_copy(project, params, "ref")
    killer(None)
    v = registry.register(ref, cand, [])
    writes = killer.count
    assert writes == 6  # the registered model, intent, the version with every tag, its logged model's link, alias, done
    expected = _state(ref)
    mv = registry.resolve(ref, NAME)
    assert str(mv.version) == v and mv.source.startswith("models:/m-")  # from its logged model, as log_model's
    assert json.loads(registry.client(ref.tracking).get_logged_model(mv.source.removeprefix("models:/")).tags[
        "mlflow.modelVersions"]) == [{"name": NAME, "version": v}]  # registered_model_name made it
    assert registry.register(ref, cand, []) == v and _state(ref) == expected  # nothing changed: the same state
    assert expected[NAME]["aliases"] == {"challenger": v} and expected[NAME]["pending"] is None
    for k in range(1, writes + 1):
        p = _store_copy(project, params, f"new-{k}")
        killer(k)
        with pytest.raises(Killed):
            registry.register(p, cand, [])
        killer(None)
        got = _state(p)
        # Killed: no version without its hash and gates, and no reader picks the one being written.
        for tags in (got[NAME] or {}).get("versions", {}).values():
            assert not registry.missing_tags(NAME, tags), k
        with pytest.raises(registry.RegistryError, match="no registered model|no complete version"):
            registry.resolve(p, NAME)
        if k > 2:  # the intent was recorded
            assert registry.describe(json.loads(got[NAME]["pending"])) == f"registration of grpo ({NAME}@challenger)"
        if k == 4:  # the version made, not yet aliased: `registry list` says so and marks it
            listed = _list(project, p, capsys)
            assert "UNFINISHED: a registration of grpo (rubricrl-extractor@challenger) was interrupted" in listed
            assert f"\n{v:<8}-" in listed and "UNFINISHED (a registration is writing it)" in listed
        assert registry.register(p, cand, []) == v
        got = _state(p)
        assert got == expected, k
        _one_per_hash(got, NAME, registry.MODEL_HASH)
        assert str(registry.resolve(p, NAME).version) == str(registry.resolve(p, f"{NAME}@challenger").version) == v
        if k > 2:
            assert "completed the unfinished registration of grpo" in capsys.readouterr().err


def test_the_same_weights_registered_again_killed_at_each_write_end_with_the_new_tags_only(project, killer, capsys):
    """A rerun with new numbers rewrites the version's tags one at a time: a kill left a mix of old and new tags. Now
    the next command (the rerun itself; once, a dry-run promotion) completes the rewrite first."""
    params = load_params(project / "params.yaml")
    v = register(project, "grpo")
    set_evals(project, base=[0] * N_TASKS, grpo=[4] * N_TASKS)  # new numbers, and now a failed rubric gate
    cand = candidate(project, "grpo")
    ref = _store_copy(project, params, "ref")
    killer(None)
    assert registry.register(ref, cand, ["probe 'copy_source': margin 0.1 < 0.4"]) == v
    writes = killer.count
    assert writes == 7  # intent, 4 changed tags (reward, field accuracy, rubric gate, run), alias, done
    expected = _state(ref)
    assert expected[NAME]["versions"][v]["eval.all.field_accuracy"] == "1.0000"
    assert expected[NAME]["versions"][v]["gate.rubric"].startswith("failed: probe")
    for k in range(1, writes + 1):
        p = _store_copy(project, params, f"again-{k}")
        killer(k)
        with pytest.raises(Killed):
            registry.register(p, cand, ["probe 'copy_source': margin 0.1 < 0.4"])
        killer(None)
        if k > 1:  # half rewritten: listed as being written, never resolved by name
            assert [r["unfinished"] for r in registry.versions(p)] == [True], k
            with pytest.raises(registry.RegistryError, match="no complete version"):
                registry.resolve(p, NAME)
        if k == 3:  # old and new tags mixed: any registry command completes the rewrite before its own work
            registry.promote(p, dry_run=True, report=None)
            assert _state(p) == expected
        assert registry.register(p, cand, ["probe 'copy_source': margin 0.1 < 0.4"]) == v
        if k > 1:
            assert "completed the unfinished registration of grpo" in capsys.readouterr().err, k
        got = _state(p)
        assert got == expected, k
        _one_per_hash(got, NAME, registry.MODEL_HASH)


def _two_exports(project: Path) -> dict[str, Path]:
    """Two verified GGUF exports of grpo (q8_0 and the chosen 4-bit q4) as metrics/export.json records them."""
    files = {"q8_0": project / "outputs/export/grpo/model-q8_0.gguf",
             "q4": project / "outputs/export/grpo/model-q4_k_m.gguf"}
    records = {}
    for i, (kind, path) in enumerate(files.items()):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"GGUF" + bytes([i]) * 512)
        records[kind] = {"artifact": str(path.relative_to(project)), "verified": True, "size_mb": 0.001,
                         "field_accuracy": 0.5, "reward": 9.0, "retention": {"field_accuracy": 1.0, "reward": 1.0},
                         "tokens_per_s": 18.0, "md5": hashlib.md5(path.read_bytes()).hexdigest(),
                         **({"type": "q4_k_m"} if kind == "q4" else {})}
    (project / "metrics/export.json").write_text(json.dumps({"grpo": {"hf_tokens_per_s": 10.0, "artifacts": records}}))
    return files


def test_a_candidates_exports_killed_at_each_write_end_all_registered(project, killer, capsys):
    params = load_params(project / "params.yaml")
    _two_exports(project)
    v = register(project, "grpo")
    cand = candidate(project, "grpo")
    gguf = f"{NAME}-gguf"
    ref = _store_copy(project, params, "ref")
    killer(None)
    out = registry.register_exports(ref, cand, v, root=project)
    writes = killer.count
    assert writes == 7  # intent, the gguf registered model, (version with every tag, alias) x 2, done
    assert out == [(gguf, "1", "grpo-q8_0"), (gguf, "2", "grpo-q4")]
    expected = _state(ref, (NAME, gguf))
    assert expected[gguf]["aliases"] == {"grpo-q8_0": "1", "grpo-q4": "2"}
    for k in range(1, writes + 1):
        p = _store_copy(project, params, f"exports-{k}")
        killer(k)
        with pytest.raises(Killed):
            registry.register_exports(p, cand, v, root=project)
        killer(None)
        got = _state(p, (NAME, gguf))
        if k == 1:  # killed before its intent: nothing registered
            assert got[gguf] is None and got[NAME]["pending"] is None
        else:  # some written: the intent names them all, and the next command completes them
            assert registry.describe(json.loads(got[NAME]["pending"])) == "registration of the grpo exports (" \
                f"{gguf}@grpo-q8_0, {gguf}@grpo-q4)"
            for tags in (got[gguf] or {}).get("versions", {}).values():
                assert not registry.missing_tags(gguf, tags)
        if k == 4:  # the first export registered, not the second: `registry list` says so
            assert f"UNFINISHED: a registration of the grpo exports ({gguf}@grpo-q8_0" in _list(project, p, capsys)
        assert registry.register_exports(p, cand, v, root=project) == out, k
        got = _state(p, (NAME, gguf))
        assert got == expected, k
        _one_per_hash(got, gguf, registry.EXPORT_HASH)


def test_a_version_left_without_its_tags_is_never_resolved_nor_aliased_and_the_next_command_mends_it(project, capsys):
    """What a registration killed before this journal left (MLflow created the version, then the tags came one at a
    time): a version without its hash, and one with its hash but no gates."""
    from rubricrl import tracking
    from rubricrl.cli.main import main

    params = load_params(project / "params.yaml")
    first = register(project, "sft")
    c = registry.client(params.tracking)
    run = registry.resolve(params, f"{NAME}/{first}").tags["registering_run"]
    orphan = c.create_model_version(NAME, f"{project}/nowhere", run_id=run).version  # no tag at all
    md5 = tracking.weights_digest(project / "outputs/grpo/model")
    partial = c.create_model_version(NAME, f"{project}/nowhere", run_id=run,
                                     tags={"stage": "grpo", "model.md5": md5}).version
    assert str(registry.resolve(params, NAME).version) == first  # the newest complete version
    rows = {r["version"]: r["missing"] for r in registry.versions(params)}
    assert rows == {str(partial): ["gate.rubric", "gate.general"], str(orphan): list(registry.COMPLETE["model"]),
                    first: []}
    main(["registry", "list", "--params", str(project / "params.yaml")])
    assert f"\n{orphan:<8}-" in (listed := capsys.readouterr().out) and "INCOMPLETE (no model.md5, gate.rubric" in listed
    with pytest.raises(registry.RegistryError, match=f"version {partial} has no gate.rubric, gate.general tag"):
        registry.move_alias(c, NAME, registry.CHAMPION, str(partial))
    c.set_registered_model_alias(NAME, registry.CHALLENGER, str(partial))  # by hand: no registration would
    with pytest.raises(registry.RegistryError, match=f"challenger version {partial} has no gate.rubric"):
        registry.promote(params)
    # The next registration deletes the version without its hash and completes the one with it (its weights).
    assert register(project, "grpo") == str(partial)
    assert f"deleted '{NAME}' version {orphan}" in capsys.readouterr().err
    assert {r["version"]: r["missing"] for r in registry.versions(params)} == {str(partial): [], first: []}
    assert str(registry.resolve(params, NAME).version) == str(partial)
