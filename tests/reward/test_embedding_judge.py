"""The embedding item judge (the packaged all-MiniLM-L6-v2): grades English tasks' unchecked items, leaves others'
ungraded with the reason."""

from __future__ import annotations

from rubricrl.config import JudgeConfig
from rubricrl.core.taskfile import Task
from rubricrl.reward.judges.base import ItemRequest
from rubricrl.reward.judges.embedding import EmbeddingJudge
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer
from tests.reward.test_items import GOLD, TICKET

ITEMS = [{"id": "options", "criterion": "Offers a full refund or a replacement", "importance": "essential"},
         {"id": "password", "criterion": "Asks for the customer's bank password", "importance": "pitfall"}]


def task(lang: str = "en", text: str = TICKET) -> Task:
    return Task.from_dict({"id": f"t-{lang}", "instruction": "Reply.", "text": text, "items": ITEMS,
                           "meta": {"lang": lang}})


def test_english_items_are_graded_by_meaning_and_chinese_ones_left_ungraded():
    judge = EmbeddingJudge(JudgeConfig(type="embedding"))
    items = task().items
    good, off, phish = judge.grade_items([
        ItemRequest(task(), GOLD, items),
        ItemRequest(task(), "Our opening hours are nine to five on weekdays.", items),
        ItemRequest(task(), GOLD + " Please send us your bank password.", items)])
    assert good.met == {"options": True, "password": True}, good.reasons
    assert off.met["options"] is False and "cosine" in off.reasons["options"]
    assert phish.met["password"] is False
    [zh] = judge.grade_items([ItemRequest(task("zh"), "您好，我们可以为您全额退款或换货。", items)])
    assert zh.met == {"options": None, "password": None} and "English only" in zh.reasons["options"]


def test_the_scorer_uses_it_as_the_rubric_item_judge():
    rubric = load_rubric("free_text")
    rubric = rubric.model_copy(update={"judges": {**rubric.judges, "emb": JudgeConfig(type="embedding")},
                                       "item_judge": "emb"})
    scorer = RubricScorer(rubric)
    en, off = scorer.score(task(), GOLD), scorer.score(task(), "Our opening hours are nine to five.")
    assert en.total == 10.0 and off.total == 0.0, (en.to_dict(), off.to_dict())
    zh = scorer.score(task("zh"), "您好，我们可以为您全额退款或换货。")
    assert "left ungraded (the item judge did not grade them)" in zh.component("items").reason


def test_a_criterion_cannot_name_it_as_its_judge_and_chinese_batches_load_no_model(monkeypatch):
    import pytest

    from rubricrl.reward.judges import embedding
    from rubricrl.reward.spec import Rubric

    data = load_rubric("json_extraction").model_dump()
    data["judges"]["emb"] = {"type": "embedding"}
    data["criteria"][0] = {"id": "covers", "kind": "judge", "judge": "emb", "description": "covers the points"}
    with pytest.raises(ValueError, match="criteria.covers.judge: 'emb' is an embedding judge, which grades rubric "
                                         "items only"):
        Rubric.model_validate(data)
    monkeypatch.setattr(embedding, "_model", lambda: pytest.fail("the model was loaded for a Chinese batch"))
    [zh] = EmbeddingJudge(JudgeConfig(type="embedding")).grade_items([ItemRequest(task("zh"), "您好。", task().items)])
    assert zh.met == {"options": None, "password": None}
