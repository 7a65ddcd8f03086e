"""General instructions mixed into GRPO so the policy keeps its general skills (the seed's 10%).

They carry no rubric. Every other general row is made verifiable: one instruction-following constraint
(lowercase, no commas, an exact closing phrase, a postscript, a <<title>>, ...) is appended, and
`rubricrl.train.reward_mix` rewards it with IFEval's checker for that constraint (if-verifiable), so
those prompts give GRPO a real signal. The other rows keep the seed's fixed medium reward: a constant
reward gives every completion of the group the same advantage (zero), so they act only through the KL
term. The constraints are written here, apart from the eval_general IF prompts, so training never sees
an eval prompt.
"""

from __future__ import annotations

import json
import random

GENERAL_PREFIX = "general:"

GENERAL_INSTRUCTIONS = [
    "Explain in two sentences why the sky is blue.",
    "Write a Python function that returns the n-th Fibonacci number iteratively.",
    "Summarise the plot of Romeo and Juliet in three sentences.",
    "What is the difference between a list and a tuple in Python?",
    "Give three tips for writing a clear email to a colleague.",
    "Translate into French: 'The meeting has been moved to Thursday afternoon.'",
    "A train travels 180 km in 2 hours. What is its average speed? Show your reasoning.",
    "Write a haiku about autumn rain.",
    "Explain what a hash table is to a beginner programmer.",
    "List the planets of the solar system in order from the sun.",
    "Write a SQL query that counts the orders per customer in a table orders(customer_id, id).",
    "What are the main causes of inflation? Answer briefly.",
    "Suggest a name for a small bakery and explain the choice in one sentence.",
    "How do you reverse a string in JavaScript?",
    "Describe the water cycle in simple terms.",
    "Write a short, polite reply declining an invitation to a party.",
    "What is the time complexity of binary search, and why?",
    "Give an example of a metaphor and explain what it means.",
    "Explain the difference between weather and climate.",
    "Write a bash command that counts the lines of every .py file in a folder.",
    "请用一句话解释什么是机器学习。",
    "写一首关于春天的四行短诗。",
    "如何在 Python 中读取一个文本文件的所有行？请给出代码。",
    "请简要说明光合作用的过程。",
    "给出三个提高睡眠质量的建议。",
    "把这句话翻译成英文：“今天天气很好，我们去公园散步吧。”",
    "一个长方形的长是 8 厘米，宽是 5 厘米，它的面积是多少？",
    "请解释什么是递归，并举一个简单的例子。",
    "写一段简短的自我介绍，用于求职面试。",
    "中国的四大发明是什么？",
    "请说明 HTTP 和 HTTPS 的主要区别。",
    "用三句话介绍一下长城。",
    "写一个 Python 函数，判断一个数是否为质数。",
    "请解释“温故而知新”的意思。",
    "列出五种常见的水果，并说明它们的颜色。",
    "如何礼貌地向同事请求帮助？请写一条消息。",
    "什么是通货膨胀？请用通俗的语言解释。",
    "请给出一个健康早餐的搭配建议。",
    "解释一下数据库中的索引有什么作用。",
    "写一句鼓励正在备考的学生的话。",
]


# (text appended to the instruction, IFEval instruction id, its kwargs), per language of the instruction.
CONSTRAINTS = {
    "en": [(" Answer in lowercase letters only, with no capital letters.", "change_case:english_lowercase", {}),
           (" Do not use any commas in your answer.", "punctuation:no_comma", {}),
           (" End your answer with the exact phrase 'Any other questions?'", "startend:end_checker",
            {"end_phrase": "Any other questions?"}),
           (" At the end, add a postscript starting with P.S.", "detectable_content:postscript",
            {"postscript_marker": "P.S."}),
           (" Give your answer a title wrapped in double angular brackets, like <<title>>.",
            "detectable_format:title", {})],
    "zh": [("请在回答的最后加上一段以 P.S. 开头的附言。", "detectable_content:postscript", {"postscript_marker": "P.S."}),
           ("请用“还有其他问题吗？”这句话结束你的回答。", "startend:end_checker", {"end_phrase": "还有其他问题吗？"}),
           ("请给回答加一个用双尖括号括起来的标题，例如 <<标题>>。", "detectable_format:title", {})],
}


def _lang(text: str) -> str:
    return "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"


def general_rows(n: int, seed: int) -> list[dict]:
    """`n` training rows (prompt messages, task_id, check) cycling through the instructions in a seeded order;
    every other row carries a verifiable constraint, `check` = JSON {"instruction_id_list", "kwargs"} ("" if none)."""
    order = list(range(len(GENERAL_INSTRUCTIONS)))
    random.Random(seed).shuffle(order)
    rows = []
    for k in range(n):
        i = order[k % len(order)]
        text, check, task_id = GENERAL_INSTRUCTIONS[i], "", f"{GENERAL_PREFIX}{i}"
        if k % 2:
            options = CONSTRAINTS[_lang(text)]
            j = (k // 2) % len(options)
            extra, instruction, kwargs = options[j]
            text, task_id = text + extra, f"{task_id}:if{j}"
            check = json.dumps({"instruction_id_list": [instruction], "kwargs": [kwargs]}, ensure_ascii=False)
        rows.append({"prompt": [{"role": "user", "content": text}], "task_id": task_id, "check": check})
    return rows


def general_count(n_tasks: int, share: float) -> int:
    """How many general rows make them `share` of the mix."""
    return round(n_tasks * share / (1 - share)) if share > 0 else 0
