"""The knowledge-QA and perplexity suites of eval_general: data, answer matching, padding-free nll."""

import json
import math

import pytest

from rubricrl.general import perplexity, qa


def test_qa_data_loads_balanced():
    items = qa.load()
    assert len(items) >= 64
    assert {i["lang"] for i in items} == {"en", "zh"}
    assert len({i["id"] for i in items}) == len(items)
    for n in range(2, len(items) + 1, 2):  # balanced for every even prefix
        langs = [i["lang"] for i in items[:n]]
        assert langs.count("en") == langs.count("zh"), n
    first = qa.load(10)
    assert len(first) == 10 and [i["lang"] for i in first].count("zh") == 5
    assert all(i["answers"] and "\n" in i["prompt"] for i in first)  # question, then the instruction
    assert "briefly" in items[0]["prompt"] and "简短" in items[1]["prompt"]


@pytest.mark.parametrize("answers, response, matched", [
    (["Paris"], "The capital is PARIS.", "Paris"),
    (["Leonardo da Vinci", "da Vinci"], "It was painted by Leonardo-da-Vinci!", "Leonardo da Vinci"),
    (["blue whale"], "The Blue Whale.", "blue whale"),          # articles and case
    (["4", "four"], "There are 4 sides.", "4"),
    (["4", "four"], "Four.", "four"),
    (["4", "four"], "About 14 of them.", None),                 # "4" is not a word of "14"
    (["100"], "It boils at 100°C.", "100"),                    # a symbol next to the number
    (["北京", "Beijing"], "中国的首都是北京市。", "北京"),         # CJK: substring
    (["北京", "Beijing"], "首都是Beijing。", "Beijing"),          # Latin answer next to CJK
    (["H2O", "H₂O"], "化学式是Ｈ₂Ｏ，对吗？", "H2O"),               # NFKC: full-width and subscript
    (["曹雪芹"], "《红楼梦》的作者是「曹雪芹」！", "曹雪芹"),      # full-width punctuation
    (["1000", "1,000"], "1,000 grams", "1,000"),
    (["Canberra"], "Sydney", None),                             # a wrong answer
    (["李白"], "杜甫", None),
])
def test_qa_matching(answers, response, matched):
    result = qa.score({"answers": answers}, response)
    assert result == {"score": 1.0 if matched else 0.0, "matched": matched}


def test_qa_summarize():
    assert qa.summarize([{"score": 1.0}, {"score": 0.0}, {"score": 1.0}, {"score": 1.0}]) == {"accuracy": 0.75, "n": 4}


@pytest.mark.parametrize("line, problem", [
    ("{not json", "invalid JSON"),
    ('{"id": "x", "lang": "fr", "question": "q?", "answers": ["a1"]}', "'lang'"),
    ('{"id": "x", "lang": "en", "question": "q?", "answers": []}', "'answers'"),
    ('{"id": "x", "lang": "en", "question": "q?", "answers": ["the"]}', "empty after normalisation"),
    ('{"id": "qa-en-001", "lang": "en", "question": "q?", "answers": ["a1"]}', "duplicate id"),
])
def test_qa_corrupt_line_names_file_and_line(tmp_path, line, problem):
    good = json.dumps({"id": "qa-en-001", "lang": "en", "question": "2+2?", "answers": ["4"]})
    path = tmp_path / "qa.jsonl"
    path.write_text(f"{good}\n\n{line}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=problem) as err:
        qa.load(path=path)
    assert f"{path}:3:" in str(err.value)
    assert len(qa.load(1, path=path)) == 1  # items past n are not read


def test_heldout_loads():
    items = perplexity.load()
    assert len(items) >= 20 and items[0]["id"] == "ppl-001"
    assert any("的" in i["text"] for i in items) and any(" the " in i["text"] for i in items)
    assert [i["id"] for i in perplexity.load(3)] == ["ppl-001", "ppl-002", "ppl-003"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rubricrl.inference.models import build_tiny_model

    path = build_tiny_model(tmp_path_factory.mktemp("ppl") / "m", seed=0)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    return model, AutoTokenizer.from_pretrained(path)


def test_nll_ignores_padding(tiny):
    model, tokenizer = tiny
    # Different lengths (one cut by max_tokens), so batches of 3 are padded.
    items = [{"id": "a", "text": "Tides rise and fall."},
             {"id": "b", "text": "茶起源于中国，已有数千年的历史。"},
             *perplexity.load(3),
             {"id": "c", "text": "A prime number has two divisors."}]
    alone = perplexity.nll(model, tokenizer, items, max_tokens=48, batch_size=1)
    batched = perplexity.nll(model, tokenizer, items, max_tokens=48, batch_size=3)
    assert [r["id"] for r in batched] == [i["id"] for i in items]
    assert len({r["tokens"] for r in batched}) > 1 and max(r["tokens"] for r in batched) == 47
    for a, b in zip(alone, batched):
        assert a["tokens"] == b["tokens"] and math.isfinite(a["nll"]) and a["nll"] > 0
        assert b["nll"] == pytest.approx(a["nll"], abs=1e-4)
    summary = perplexity.summarize(batched)
    assert summary["tokens"] == sum(r["tokens"] for r in batched) and summary["n"] == len(items)
    assert summary["perplexity"] == pytest.approx(math.exp(summary["mean_nll"]))


def test_nll_matches_plain_cross_entropy(tiny):
    import torch

    model, tokenizer = tiny
    text = "The water cycle moves water between the sea, the air and the land."
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, :-1]
    expected = torch.nn.functional.cross_entropy(logits, ids[0, 1:]).item()
    [result] = perplexity.nll(model, tokenizer, [{"id": "w", "text": text}])
    assert result == {"id": "w", "tokens": ids.shape[1] - 1, "nll": pytest.approx(expected, abs=1e-5)}
