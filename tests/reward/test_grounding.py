"""Grounding without a reference: numbers, units, dates, Chinese numerals, copying and hedges.

Each rule has a positive and a negative case: a policy trained against the label-free judge finds
every value the matcher accepts that the text does not state.

Decided for dates and times: as the text writes them they are spans and always supported; a date
reformatted to YYYY-MM-DD (a time to HH:MM) counts only when the task asks for that format (a
constraint or a schema pattern/format) and the text gives the same day (time) with its year.
Thresholds of the copy rule: the longest gold strings of the generated data (seed 0, 800 + 200
tasks) are 31 characters / 7 words (Latin) and 24 characters (CJK), far below 80 chars + 12 words / 40.
"""

import json

import pytest

from rubricrl.data.domains.values import UNIT_WORDS
from rubricrl.reward.grounding import (COPY_MAX_CHARS, COPY_MAX_CJK_CHARS, COPY_MAX_WORDS, STRICT, UNIT_WHITELIST, FieldRule,
                                Source, copy_problem, field_rules, parse_number, rules_for, source_for, values_match)
from rubricrl.reward.judges.base import JudgeRequest
from rubricrl.reward.judges.grounded import GroundedJudge
from rubricrl.reward.rules import TaskContext, invented_fields
from rubricrl.reward.spec import Criterion
from rubricrl.core.taskfile import Task

MASS, TIME, PERCENT = FieldRule((0.001, 1.0, 1000.0)), FieldRule((1 / 60, 1.0, 60.0)), FieldRule((0.01, 1.0, 100.0))
WAN = FieldRule((0.0001, 1.0, 10000.0))
DATE, HHMM = FieldRule(date=True), FieldRule(time=True)

# (source text, value, rule, supported?)
CASES = [
    # thousands separators
    ("售价1,299元", 1299, STRICT, True),
    ("售价1,299元", "1299", STRICT, True),
    ("It costs $1,299.", "1,299", STRICT, True),
    ("编号12,99", 1299, STRICT, False),
    ("编号12,99", "1299", STRICT, False),
    ("It costs $1,299.", "299", STRICT, False),  # a number cut out of a number
    ("It costs $1,299.", 299, STRICT, False),
    # decimals
    ("It costs $12.99 now.", 12.99, STRICT, True),
    ("It costs $12.99 now.", "12.99", STRICT, True),
    ("It costs $12.99 now.", "99", STRICT, False),
    ("It costs $12.99 now.", 1299, STRICT, False),
    # signs and ranges
    ("Net income was -3.5 million.", -3.5, STRICT, True),
    ("月薪8000元-16000元", 16000, STRICT, True),
    ("月薪8000元-16000元", -16000, STRICT, False),
    # Chinese multipliers
    ("总价3.5万元", 35000, STRICT, True),
    ("总价3.5万元", 3.5, STRICT, True),
    ("总价3.5万元", "3.5万", STRICT, True),
    ("总价3.5万元", 350000, STRICT, False),
    ("总价3.5万元", 3500, STRICT, False),
    # k / M / million / billion
    ("Salary 12k a month.", 12000, STRICT, True),
    ("Salary 12k a month.", 1200, STRICT, False),
    ("Revenue was $2.1 million.", 2100000, STRICT, True),
    ("Revenue was $2.1 million.", 21000000, STRICT, False),
    ("Revenue was $4.2M.", 4200000, STRICT, True),
    ("Revenue was $4.2 billion.", 4200000000, STRICT, True),
    ("Revenue was $4.2 billion.", 4200000, STRICT, False),
    # Chinese numerals
    ("要求十五年以上经验。", 15, STRICT, True),
    ("共招一百二十人。", 120, STRICT, True),
    ("三室两卫，人数：三", 2, STRICT, True),
    ("负责人陈一鸣。", 1, STRICT, False),  # a name, not the number one
    ("要求十五年以上经验。", 5, STRICT, False),
    # full-width digits
    ("售价２９９９元", 2999, STRICT, True),
    ("售价２９９９元", "2999元", STRICT, True),
    ("售价２９９９元", 299, STRICT, False),
    # units tight and spaced
    ("Battery: 30 h on a charge.", "30h", STRICT, True),
    ("Battery: 30h on a charge.", "30 h", STRICT, True),
    ("Battery: 30h on a charge.", 30, STRICT, True),
    ("Battery: 30h on a charge.", "3 h", STRICT, False),
    # dates as written are text spans; a reformatted date only where the task asks for the format
    ("Bought on March 5, 2024.", "March 5, 2024", STRICT, True),
    ("于2024年3月5日购买", "2024年3月5日", STRICT, True),
    ("Bought on March 5, 2024.", "2024-03-05", STRICT, False),
    ("Bought on March 5, 2024.", "2024-03-05", DATE, True),
    ("Bought on 5 March 2024.", "2024-03-05", DATE, True),
    ("于2024年3月5日购买", "2024-03-05", DATE, True),
    ("航班2026.11.13起飞", "2026-11-13", DATE, True),
    ("Bought on March 5, 2024.", "2024-03-06", DATE, False),  # not the same day
    ("Bought on March 5.", "2024-03-05", DATE, False),  # the text gives no year
    # times likewise
    ("Departs at 3:30 pm.", "15:30", HHMM, True),
    ("下午3点半起飞", "15:30", HHMM, True),
    ("晚上7:45起飞", "19:45", HHMM, True),
    ("Departs at 3:30 pm.", "15:30", STRICT, False),
    ("Departs at 3:30 pm.", "03:30", HHMM, False),
    # unit scaling only with a constraint that asks for it (per family, both ways)
    ("Weight: 1.2 kg.", 1200, MASS, True),
    ("Weight: 1.2 kg.", 1200, STRICT, False),
    ("Weight: 350 g.", 0.35, MASS, True),
    ("Weight: 350 g.", 0.35, STRICT, False),
    ("Battery lasts 30 hours.", 1800, TIME, True),
    ("Battery lasts 30 hours.", 1800, STRICT, False),
    ("Wait was 90 minutes.", 1.5, TIME, True),
    ("Wait was 90 minutes.", 1.5, STRICT, False),
    ("Growth was 3.8%.", 0.038, PERCENT, True),
    ("Growth was 3.8%.", 0.038, STRICT, False),
    ("It costs $29.99.", 2999, PERCENT, True),  # cents
    ("It costs $29.99.", 2999, STRICT, False),
    ("总价350万元", 350, WAN, True),
    ("总价3500000元", 350, WAN, True),
    ("总价3500000元", 350, STRICT, False),
    ("It costs 2999 yuan.", 2999000, MASS, True),  # the factor is the field's, not the value's kind
    ("It costs 2999 yuan.", 2999000, STRICT, False),
    ("It costs 2999 yuan.", 0.2999, STRICT, False),
    ("It costs 2999 yuan.", 29.99, STRICT, False),
    # copying: a short span is an extraction, a sentence-spanning or over-long copy is not
    ("The sound is great. The battery is weak.", "the battery is weak", STRICT, True),
    ("The sound is great. The battery is weak.", "The sound is great. The battery is weak", STRICT, False),
    ("The sound is great. The battery is weak.", "sound is great the battery", STRICT, False),
    ("音质很好。续航一般。", "续航一般", STRICT, True),
    ("音质很好。续航一般。", "音质很好。续航一般", STRICT, False),
    ("音质很好。续航一般。", "音质很好续航一般", STRICT, False),
    ("Seen by Dr. Patel today.", "Dr. Patel", STRICT, True),  # an abbreviation is no sentence end
    ("Q: How many bedrooms? A: 3.", "How many bedrooms A 3", STRICT, False),
    ("Price: $299\nRating: 4/5", "$299 Rating", STRICT, False),  # a line break ends a sentence too
    # multi-word values in another order, within one sentence
    ("Reviewed by Wei Chen.", "Chen Wei", STRICT, True),
    ("Wei arrived. Chen left.", "Chen Wei", STRICT, False),
    # words and codes are not cut
    ("I bought the AirBeat Pro.", "AirBeat", STRICT, True),  # a span: only a reference can say it is short
    ("I bought the AirBeat Pro.", "Air", STRICT, False),
    ("您预订的2026.11.133U1696航班", "3U1696", STRICT, True),
    # hedged numbers are not what the text states
    ("It costs 2999 yuan.", "about 2999", STRICT, False),
    ("It costs 2999 yuan.", "~2999", STRICT, False),
    ("售价2999元", "约2999元", STRICT, False),
    ("售价2999元", "2999元左右", STRICT, False),
    # booleans and nulls cannot be checked against text
    ("anything", None, STRICT, True),
    ("anything", True, STRICT, True),
]


@pytest.mark.parametrize("text,value,rule,expected", CASES, ids=[f"{i}-{c[1]!r}"[:60] for i, c in enumerate(CASES)])
def test_supports(text, value, rule, expected):
    assert Source(text).supports(value, rule) is expected


@pytest.mark.parametrize("value,expected", [
    (2999, 2999.0), ("2999", 2999.0), ("1,299.00", 1299.0), ("¥1,299", 1299.0), ("￥1299", 1299.0),
    ("1299元", 1299.0), ("人民币1299元", 1299.0), ("US$1,299", 1299.0), ("1,299.00 USD", 1299.0),
    ("3.5万", 35000.0), ("3.5万元", 35000.0), ("$4.2 billion", 4.2e9), ("12k", 12000.0), ("2.1 million", 2.1e6),
    ("3.8%", 3.8), ("百分之3.8", 3.8), ("30 hours", 30.0), ("1.2kg", 1.2), ("85 square metres", 85.0),
    ("十五", 15.0), ("一百二十", 120.0), ("２９９９", 2999.0), ("-3.5", -3.5),
    # hedges, qualifiers and things that are no single number
    ("about 2999", None), ("approx. 25", None), ("approximately 25", None), ("around 25", None), ("~25", None),
    ("≈25", None), ("约2999", None), ("大约2999元", None), ("25左右", None), ("maybe 25", None), ("up to 30 hours", None),
    ("over 25", None), ("less than 25", None), ("25+", None), ("<25", None), ("12,99", None), ("2024年3月5日", None),
    ("15:30", None), ("8000-16000", None), ("陈一鸣", None), ("UA 2281", None), ("CS-24003", None), ("十", None),
    (True, None), (float("nan"), None), ("", None),
])
def test_parse_number(value, expected):
    assert parse_number(value) == expected


def test_unit_words_of_the_generator_are_whitelisted():
    for en, zh in UNIT_WORDS.values():
        for word in en + zh:
            assert word.replace(" ", "") in UNIT_WHITELIST, word
            assert parse_number(f"12 {word}") == 12.0, word


@pytest.mark.parametrize("pred,gold,credit", [
    ("about 2999", 2999, 0.0), ("约2999元", "2999元", 0.0), ("~25", 25, 0.0), ("2999元", 2999, 1.0),
    ("AirBeat", "AirBeat Pro", 0.0), ("AirBeat Pro", "airbeat pro", 1.0), ("2999元", "¥2999", 0.5),
    (["a", "b"], ["a", "b"], 1.0),
])
def test_values_match(pred, gold, credit):
    assert values_match(pred, gold) == credit


@pytest.mark.parametrize("value,limit,bad", [
    ("walking distance to the subway", None, False),
    ("The battery is weak. It died.", None, True),
    ("电池一般。续航短", None, True),
    (" ".join(["word"] * 17), None, True),  # 84 characters, 17 words
    ("a" * 90, None, False),  # long but one word (a code, a URL): not a passage
    ("很" * (COPY_MAX_CJK_CHARS + 1), None, True),
    ("很" * COPY_MAX_CJK_CHARS, None, False),
    ("AirBeat Pro", 5, True),  # the schema's maxLength is a tighter limit
])
def test_copy_problem(value, limit, bad):
    assert (copy_problem(value, limit) is not None) is bad
    assert COPY_MAX_CHARS == 80 and COPY_MAX_WORDS == 12


@pytest.mark.parametrize("name,constraint,description,factors", [
    ("weight_g", "Give weight_g in grams.", None, {1.0, 1000.0, 0.001}),
    ("weight_g", "weight_g 以克为单位。", None, {1.0, 1000.0, 0.001}),
    ("weight_kg", "Give weight_kg in kilograms.", None, {1.0, 1000.0, 0.001}),
    ("battery_minutes", "Give battery_minutes in minutes, as a whole number.", None, {1.0, 60.0, 1 / 60}),
    ("battery_hours", "battery_hours 以小时为单位。", None, {1.0, 60.0, 1 / 60}),
    ("growth", "Give growth as a fraction, not a percentage (3.8% -> 0.038).", None, {1.0, 100.0, 0.01}),
    ("growth", "growth 写成小数而不是百分数（3.8% 写成 0.038）。", None, {1.0, 100.0, 0.01}),
    ("growth", "Give growth as a number of percent (3.8% -> 3.8).", None, {1.0, 100.0, 0.01}),
    ("price_cents", "Give price_cents in cents.", None, {1.0, 100.0, 0.01}),
    ("price_wan", "Give price_wan in ten-thousands of yuan (万元).", None, {1.0, 1e4, 1e-4}),
    ("price_wan", "price_wan 以万元为单位。", None, {1.0, 1e4, 1e-4}),
    ("revenue_musd", "Give revenue_musd in millions of US dollars.", None, {1.0, 1e6, 1e-6}),
    ("revenue_yi", "revenue_yi 以亿元为单位。", None, {1.0, 1e8, 1e-8}),
    ("revenue_billions", "Give revenue_billions in billions of US dollars.", None, {1.0, 1e9, 1e-9}),
    ("salary_k", "Give salary_k in thousands.", None, {1.0, 1e3, 1e-3}),
    ("salary_k", "salary_k 以千元为单位。", None, {1.0, 1e3, 1e-3}),
    ("weight", None, "Weight in grams", {1.0, 1000.0, 0.001}),  # the property's description names a unit
    # no conversion asked for this field
    ("weight", None, None, {1.0}),
    ("weight", "Give other_field in grams.", None, {1.0}),  # a constraint on another field
    ("weight", "Give weight_g in grams.", None, {1.0}),  # another field whose name contains this one
    ("price", "Give price as a plain number, without currency symbol or unit.", None, {1.0}),
    ("price", "Write price as a string with exactly two decimals, without currency symbol or thousands separator "
              '(e.g. "1299.00").', None, {1.0}),
    ("growth", 'Write growth as a percentage string such as "3.8%".', None, {1.0}),
    ("departs_at", "Write departs_at in 24-hour HH:MM format.", None, {1.0}),
    ("departs_at", "departs_at 使用 24 小时制 HH:MM 格式。", None, {1.0}),
])
def test_field_rules_factors(name, constraint, description, factors):
    sub = {"type": "number"}
    if description:
        sub["description"] = description
    props = {name: sub, "other_field": {"type": "number"}, "weight_g": {"type": "number"}}
    rules = field_rules([constraint] if constraint else [], props)
    assert set(rules[name].factors) == factors


def test_field_rules_formats_and_limits():
    props = {"d": {"type": "string"}, "t": {"type": "string", "pattern": r"^([01]\d|2[0-3]):[0-5]\d$"},
             "iso": {"type": "string", "format": "date"}, "s": {"type": "string", "maxLength": 20},
             "tags": {"type": "array", "items": {"type": "string", "maxLength": 10}}, "plain": {"type": "string"}}
    rules = field_rules(["Write d as YYYY-MM-DD."], props)
    assert rules["d"].date and rules["t"].time and rules["iso"].date
    assert rules["s"].max_chars == 20 and rules["tags"].max_chars == 10
    # The formats are the task's: another field's date in ISO is a stated day in the wrong field, not invented.
    assert rules["plain"] == FieldRule(date=True, time=True)
    assert field_rules(["Copy d as the text writes it."], {"d": {"type": "string"}})["d"] == STRICT


def test_source_cache_keys_include_the_rule():
    src = Source("Weight: 1.2 kg.")
    assert src.supports(1200, MASS) and not src.supports(1200, STRICT) and src.supports(1200, MASS)
    assert source_for("Weight: 1.2 kg.") is source_for("Weight: 1.2 kg.")


# --- the judge and the invented-value penalty without a reference --------------------------------

TEXT = ("I bought the AirBeat Pro headphones from Best Buy for $2,999. The sound is great and the noise "
        "cancelling works well. The battery lasts 30 hours, which is plenty for a long flight across the "
        "Atlantic and back again without charging.")
SCHEMA = {"type": "object", "properties": {"product": {"type": "string"}, "price": {"type": "number"},
                                           "battery_minutes": {"type": "integer"}, "store": {"type": "string"}},
          "required": ["product", "price", "battery_minutes", "store"]}
CONSTRAINTS = ("Use null for any field the text does not state.", "Give battery_minutes in minutes.")
RIGHT = {"product": "AirBeat Pro", "price": 2999, "battery_minutes": 1800, "store": "Best Buy"}


def _task(reference=None):
    return Task(id="t-grounding", instruction="Extract.", text=TEXT, schema=SCHEMA, constraints=CONSTRAINTS,
                reference=reference)


def _faithfulness(task, answer):
    crit = Criterion(id="faithfulness", kind="judge", judge="grounded", description="faithful", range=(0, 3))
    verdict = GroundedJudge().judge(JudgeRequest(task, json.dumps(answer), answer, crit))
    return verdict.score, verdict.reason


def test_label_free_judge_accepts_the_right_answer():
    task = _task()
    score, reason = _faithfulness(task, RIGHT)
    assert score == 3.0, reason
    assert invented_fields(TaskContext.build(task), RIGHT) == []
    assert TaskContext.build(task).grounding["battery_minutes"].factors == (1 / 60, 1.0, 60.0)
    assert rules_for(task)["price"] == STRICT


@pytest.mark.parametrize("reference", [None, RIGHT])
def test_the_right_number_in_the_wrong_type_is_not_faithful(reference):
    """'2999 dollars' for a number field: the strict metric counts it wrong, so the judge gives it no credit (it used
    to read it as 2999: the field_types share alone priced it), with the reference or without; a plain decimal string
    is the one type the strict metric forgives, and so does the judge."""
    task = _task(reference)
    for wrong in ("2999 dollars", "$2999", {"value": 2999}, [2999]):
        score, reason = _faithfulness(task, {**RIGHT, "price": wrong})
        assert score == 3.0 * 3 / 4 and "price: " in reason and "breaks the field's schema" in reason, (wrong, reason)
    assert _faithfulness(task, {**RIGHT, "price": "2999"})[0] == 3.0
    assert _faithfulness(task, {**RIGHT, "battery_minutes": "1800.5"})[0] < 3.0  # a decimal for an integer
    # A gold value that breaks its own schema: the schema is off, so the gold answer keeps full credit.
    odd = _task({**RIGHT, "price": "2999 dollars"})
    assert _faithfulness(odd, {**RIGHT, "price": "2999 dollars"})[0] == 3.0


def test_a_broken_schema_the_strict_metric_forgives_keeps_its_credit():
    """An enum's value in another case is right by the strict metric (strings compare casefolded): the judge credits
    it as before (field_types charges the enum); another value that breaks the enum earns nothing."""
    schema = {"type": "object", "properties": {"colour": {"type": "string", "enum": ["red", "blue"]},
                                               "price": {"type": "number"}}}
    task = Task(id="t-enum", instruction="Extract.", text="A red lamp for $25.", schema=schema,
                reference={"colour": "red", "price": 25})
    assert _faithfulness(task, {"colour": " RED ", "price": 25})[0] == 3.0
    assert _faithfulness(task, {"colour": "Red!", "price": 25})[0] == 1.5
    assert _faithfulness(task, {"colour": "red", "price": "25"})[0] == 3.0
    assert _faithfulness(task, {"colour": "red", "price": "25 dollars"})[0] == 1.5


@pytest.mark.parametrize("field,value,why", [
    ("price", 2999000, "another unit"),  # scaled by a unit the text never states
    ("price", 2.999, "another unit"),
    ("store", "The sound is great and the noise cancelling works well. The battery lasts 30 hours",
     "sentence boundary"),
    ("product", "The battery lasts 30 hours, which is plenty for a long flight across the Atlantic and back again",
     "words copied"),  # one sentence, but 18 words and 97 characters: a passage
    ("price", "about 2999", "breaks the field's schema"),  # a string for a number: no credit, found or not
])
def test_label_free_judge_and_penalty_reject_scaled_copied_and_hedged_values(field, value, why):
    task = _task()
    right, _ = _faithfulness(task, RIGHT)
    wrong = {**RIGHT, field: value}
    score, reason = _faithfulness(task, wrong)
    assert score < right and why in reason, reason
    assert invented_fields(TaskContext.build(task), wrong) == [field]


def test_with_a_reference_the_judge_compares_to_gold():
    task = _task(reference=RIGHT)
    assert _faithfulness(task, RIGHT)[0] == 3.0
    for field, value in [("product", "AirBeat"), ("price", "about 2999"), ("price", 2999000)]:
        score, reason = _faithfulness(task, {**RIGHT, field: value})
        assert score < 3.0, (field, value, reason)
    ctx = TaskContext.build(task)
    assert invented_fields(ctx, {**RIGHT, "price": 2999000}) == ["price"]
    assert invented_fields(ctx, {**RIGHT, "price": "2999元"}) == []  # the gold in another notation
