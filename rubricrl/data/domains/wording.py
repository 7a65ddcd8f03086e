"""Task-level wording: instructions, the null policy and general output constraints, per language."""

from __future__ import annotations

import random

INSTRUCTIONS = {
    "en": (
        "Extract the information below from the {topic} and return it as JSON.",
        "Read the {topic} and fill in every field of the JSON Schema.",
        "From the following {topic}, pull out the fields defined in the schema.",
        "Turn this {topic} into a JSON object that follows the schema.",
        "Please extract structured data from the {topic} according to the schema.",
        "Fill in the schema with what the {topic} says.",
        "You are given a {topic}. Extract the requested fields as a JSON object.",
        "Parse the {topic} and output the fields listed in the JSON Schema.",
    ),
    "zh": (
        "请从下面的{topic}中提取信息，按给定的 JSON Schema 输出。",
        "阅读这段{topic}，填写 JSON Schema 中的所有字段。",
        "根据以下{topic}，抽取 schema 中定义的字段，输出 JSON 对象。",
        "把这段{topic}整理成符合 schema 的 JSON。",
        "请按照 schema 从{topic}里抽取结构化信息。",
        "下面是一段{topic}，请提取所需字段并以 JSON 返回。",
        "从{topic}中找出 schema 要求的各项内容，输出一个 JSON 对象。",
        "请解析以下{topic}，输出 schema 列出的字段。",
    ),
}

NULL_POLICY = {
    "en": (
        "If the text does not mention a field, use null; do not guess.",
        "Use null for any field the text does not state; never invent a value.",
        "Fields that the text leaves out must be null; do not infer or guess them.",
        "When the information is not in the text, write null instead of guessing.",
    ),
    "zh": (
        "文本中没有提到的字段填 null，不要猜测。",
        "原文没有给出的信息一律填 null，不要编造。",
        "如果文本未提及某个字段，请填 null，不要推测。",
        "找不到的字段写 null，不得臆测或编造。",
    ),
}

GENERAL = {
    "en": (
        "Output only the JSON object, with no explanation.",
        "Keep names exactly as they are spelled in the text.",
        "Do not add commentary before or after the JSON.",
        "Use the values that are current at the end of the text.",
        "Numbers must be JSON numbers unless the schema asks for a string.",
    ),
    "zh": (
        "只输出 JSON 对象，不要附加解释。",
        "人名、地名按原文写法填写。",
        "JSON 前后不要添加任何说明文字。",
        "以文本中最新的数值为准。",
        "除非 schema 要求字符串，数值请用 JSON 数字。",
    ),
}


def instruction(rng: random.Random, lang: str, topics: tuple[str, ...]) -> str:
    return rng.choice(INSTRUCTIONS[lang]).format(topic=rng.choice(topics))


def constraints(rng: random.Random, lang: str, field_constraints: list[str]) -> list[str]:
    """The null policy first (always), then the field constraints, then 0-2 general ones."""
    out = [rng.choice(NULL_POLICY[lang])]
    out += [c for i, c in enumerate(field_constraints) if c not in field_constraints[:i]]
    out += rng.sample(GENERAL[lang], rng.choice([0, 0, 1, 1, 2]))
    return out
