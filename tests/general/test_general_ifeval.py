"""The instruction-following suite of eval_general: data file, strict scoring via if-verifiable, summary."""

import json

import pytest

from rubricrl.general import ifeval


@pytest.fixture(scope="module")
def items():
    return ifeval.load()


@pytest.fixture(scope="module")
def by_id(items):
    return {item["id"]: item for item in items}


def test_data_file_loads_balanced(items):
    assert len(items) >= 64
    langs = [item["lang"] for item in items]
    assert langs.count("en") >= 30 and langs.count("zh") >= 30
    for n in range(2, len(items) + 1, 2):  # every even prefix is half English, half Chinese
        assert langs[:n].count("en") == n // 2
    assert [item["id"] for item in ifeval.load(10)] == [item["id"] for item in items[:10]]
    assert len({item["id"] for item in items}) == len(items)
    assert all(len(item["prompt"].split()) < 60 for item in items if item["lang"] == "en")


def test_every_item_scores_without_crashing(items):
    """A bad item must never crash the stage: empty, blank and arbitrary responses all score."""
    for item in items:
        n = len(item["instruction_id_list"])
        for response in ("", "  \n", "<think>unfinished"):
            assert ifeval.score(item, response) == {
                "score": 0.0, "instructions": [False] * n, "instruction_ids": item["instruction_id_list"]}
        scored = ifeval.score(item, "Some reply, 一些回答。\n* x\n***\n{}")
        assert len(scored["instructions"]) == n and scored["score"] in (0.0, 1.0)


# id -> (a compliant response, a non-compliant one)
CASES = {
    "if-en-002": ("i love mangoes because they are sweet and juicy. they taste like summer to me.",
                  "I love mangoes because they are sweet and juicy."),
    "if-en-003": ("Sunlight is made of many colors. Air molecules scatter blue light more than red light so the sky "
                  "looks blue.",
                  "Sunlight is made of many colors, and air molecules scatter blue light more than red light."),
    "if-en-009": ("The moon orbits Earth and lights up the night sky.",
                  "The moon is a rocky body in space that orbits Earth."),
    "if-en-013": ("KEEP LEARNING AND KEEP TRYING. EVERY MISTAKE IS A CHANCE TO GET BETTER.",
                  "Keep learning and keep trying. Every mistake is a chance to get better."),
    "if-en-019": ("Bread is one of the oldest foods.\n\nIt is made from flour, water and yeast.",
                  "People have baked bread for thousands of years.\n\nIt is made from flour, water and yeast."),
    "if-en-023": ("On weekends many people relax at home. Some go for a walk in the park. Others meet their friends "
                  "for lunch.",
                  "On weekends many people relax at home. Others meet their friends for lunch."),
    "if-zh-001": ("<<月光>>\n月亮挂在天上，\n照亮回家的路。", "月光\n月亮挂在天上，\n照亮回家的路。"),
    "if-zh-004": ("春节是中国最重要的传统节日，家人会团聚吃年夜饭。祝你新年快乐！",
                  "春节是中国最重要的传统节日，家人会团聚吃年夜饭。新年快乐！"),
    "if-zh-005": ('```json\n{"name": "小明", "age": 12}\n```', '小明今年12岁。{"name": "小明", "age": 12}'),
    "if-zh-012": ("我最喜欢饺子。饺子很好吃，尤其是妈妈包的，真的特别好吃。", "我最喜欢饺子，尤其是妈妈包的，真的很好吃。"),
    "if-zh-015": ("* 北京是中国的首都。\n* 北京有故宫。\n* 北京有长城。", "* 北京有故宫。\n* 北京有长城。\n* 北京有烤鸭。"),
    "if-zh-016": ("<<大海>>\n大海很蓝，也很宽广。谢谢阅读。", "<<大海>>\n谢谢阅读。大海很蓝，也很宽广。"),
    "if-zh-018": ("亲爱的[名字]：\n祝你[年龄]岁生日快乐！来自[朋友]。\nP.S. 记得吃蛋糕。", "亲爱的[名字]：\n祝你生日快乐！\nP.S. 记得吃蛋糕。"),
    "if-zh-019": ("雨一直下，路上都是水。\n***\n出门时我带了一把雨伞。", "雨一直下，路上都是水。出门时我带了一把雨伞。"),
    "if-zh-024": ("SECTION 1\n早餐吃包子。\nSECTION 2\n午餐吃米饭。\nSECTION 3\n晚餐吃面条。",
                  "SECTION 1\n早餐吃包子。\nSECTION 2\n午餐吃米饭。"),
    "if-zh-028": ("一年有几个季节？一年有四个季节。", "一年有四个季节：春、夏、秋、冬。"),
}


@pytest.mark.parametrize("item_id", sorted(CASES))
def test_compliant_scores_one_and_non_compliant_zero(by_id, item_id):
    good, bad = CASES[item_id]
    item = by_id[item_id]
    ok = ifeval.score(item, good)
    assert ok["score"] == 1.0 and all(ok["instructions"]), ok
    assert ok["instruction_ids"] == item["instruction_id_list"]
    assert ifeval.score(item, bad)["score"] == 0.0


def test_per_instruction_verdicts(by_id):
    """Verdicts come per instruction, in order; one failed instruction fails the prompt."""
    scored = ifeval.score(by_id["if-en-009"], "The moon is bright.")  # < 30 words, no "space"
    assert scored["instructions"] == [True, True]
    scored = ifeval.score(by_id["if-en-009"], "The moon is far away in space.")
    assert scored["instructions"] == [True, False] and scored["score"] == 0.0


def test_summarize_arithmetic():
    scored = [
        {"score": 1.0, "instructions": [True, True], "instruction_ids": ["a", "b"]},
        {"score": 0.0, "instructions": [True, False], "instruction_ids": ["a", "b"]},
        {"score": 0.0, "instructions": [False], "instruction_ids": ["a"]},
        {"score": 1.0, "instructions": [True], "instruction_ids": ["a"]},
    ]
    assert ifeval.summarize(scored) == {"prompt_strict": 0.5, "instruction_strict": 4 / 6, "n": 4}
    with pytest.raises(ValueError):
        ifeval.summarize([])


GOOD = {"id": "t-1", "lang": "en", "prompt": "Say hi.", "instruction_id_list": ["detectable_format:title"],
        "kwargs": [{}]}


@pytest.mark.parametrize("bad_line, problem", [
    ("{not json", "Expecting"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "prompt"} | {"id": "t-2"}), "missing key 'prompt'"),
    (json.dumps(GOOD | {"id": "t-2", "instruction_id_list": ["keywords:nope"]}), "unknown instruction id"),
    (json.dumps(GOOD | {"id": "t-2", "kwargs": [{"num_bullets": 2}]}), "rejected by"),  # title takes no kwargs
    (json.dumps(GOOD | {"id": "t-2", "instruction_id_list": ["detectable_format:number_bullet_lists"],
                        "kwargs": [{}]}), "needs exactly the kwargs"),  # would be drawn at random
    (json.dumps(GOOD | {"id": "t-2", "instruction_id_list": ["keywords:existence"],
                        "kwargs": [{"keywords": ["(unclosed"]}]}), "rejected by"),  # not a valid regex
    (json.dumps(GOOD | {"id": "t-2", "instruction_id_list": ["language:response_language"],
                        "kwargs": [{"language": "zh"}]}), "rejected by"),  # not in the package's table
    (json.dumps(GOOD | {"id": "t-2", "lang": "fr"}), "'lang'"),
    (json.dumps(GOOD), "duplicate id"),
])
def test_corrupt_line_names_file_and_line(tmp_path, bad_line, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(GOOD) + "\n\n" + bad_line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"bad\.jsonl:3: .*{problem}"):
        ifeval.load(path=path)
