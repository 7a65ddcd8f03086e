"""Items for free-text tasks that have none: the deterministic draft (safe on every gold reply, catching what needs no
understanding) and the validated proposals of a model behind the openai endpoint."""

from __future__ import annotations

import collections
import dataclasses
import json

import pytest

from rubricrl.calibrate.items_draft import draft_items
from rubricrl.calibrate.items_propose import parse_item_proposals, propose_items
from rubricrl.calibrate.reply_corruptions import corrupt_reply
from rubricrl.config import JudgeConfig
from rubricrl.core.items import Item, check_items
from rubricrl.data.replies import generate_replies
from rubricrl.reward.load import load_rubric
from rubricrl.reward.scoring import RubricScorer


def drafted(task):
    return dataclasses.replace(task, items=tuple(Item.from_dict(i) for i in draft_items(task)))


def test_the_draft_gives_every_gold_reply_full_marks_and_catches_what_needs_no_understanding():
    scorer = RubricScorer(load_rubric("free_text"))
    caught = collections.defaultdict(list)
    for task in generate_replies(seed=2, n_train=60, n_test=0)["train"]:
        mine = drafted(task)
        assert not check_items([i.to_dict() for i in mine.items])
        gold = scorer.score(mine, task.reference).total
        assert gold == 10.0, task.id
        for mode, reply in corrupt_reply(task).items():
            caught[mode].append(gold - scorer.score(mine, reply).total >= 0.4)
    rate = {m: sum(v) / len(v) for m, v in caught.items()}
    assert rate["flatter_judge"] == rate["wrong_language"] == rate["drop_essential"] == 1.0, rate
    assert rate["change_amount"] >= 0.95, rate  # the changed amount is not in the source
    # What the policy forbids needs understanding: the draft catches a forbidden total (a number the source does
    # not give) but not a forbidden promise; the proposer or the user adds those.
    assert 0.5 < rate["break_policy"] < 1.0, rate


@pytest.mark.parametrize("constraint, limit", [("Keep it under 80 words.", 80), ("回复不超过200字。", 200)])
def test_a_stated_length_limit_becomes_an_optional_item(constraint, limit):
    task = dataclasses.replace(generate_replies(seed=2, n_train=1, n_test=0)["train"][0], constraints=(constraint,))
    [length] = [i for i in draft_items(task) if i["id"] == "length"]
    assert length["check"] == {"kind": "length", "max_words": limit} and length["importance"] == "optional"


def test_proposals_are_kept_only_when_valid():
    text = json.dumps({"items": [
        {"id": "states amount", "criterion": "States the refund of 45 EUR", "importance": "essential",
         "check": {"kind": "value", "value": 45}},
        {"id": "tone", "criterion": "Warm tone", "importance": "optional", "check": {}},
        {"id": "bad", "criterion": "x", "importance": "vital"},
        {"id": "tone", "criterion": "Warm again", "importance": "optional"},
        {"id": "re", "criterion": "y", "importance": "pitfall", "check": {"kind": "regex", "pattern": "("}},
    ]})
    kept, problems = parse_item_proposals(text)
    assert [i["id"] for i in kept] == ["llm_states_amount", "llm_tone"] and "check" not in kept[1]
    assert len(problems) == 3 and problems[0].startswith("items[2]: skipped: llm_bad.importance")
    assert "duplicate item id" in problems[1] and "not a valid regular expression" in problems[2]
    none, why = parse_item_proposals("nope")
    assert none == [] and why[0].startswith("the proposal is not JSON")


@pytest.mark.slow
def test_the_live_endpoint_proposes_items_that_validate_or_are_reported(llama_server):
    task = generate_replies(seed=2, n_train=1, n_test=0)["train"][0]
    config = JudgeConfig(type="openai", base_url=llama_server, model="smollm2-judge", response_format="json_object",
                         cache_dir=None, max_tokens=384, backoff_s=0.05)
    kept, problems = propose_items(config, task)
    # The reply schema asks for at least one item (a grammar on llama.cpp): each is kept valid or reported.
    assert kept or problems  # a 135M model proposes little of use; what it proposes is checked either way
    assert not kept or not check_items(kept)
    assert all(i["id"].startswith("llm_") for i in kept)
