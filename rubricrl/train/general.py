"""General instructions mixed into GRPO so the policy keeps its general skills (the seed's 10%).

They carry no rubric: `rubricrl.train.reward_mix` gives them a fixed medium reward.
"""

from __future__ import annotations

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


def general_rows(n: int, seed: int) -> list[dict]:
    """`n` training rows (prompt messages + task_id) cycling through the instructions in a seeded order."""
    order = list(range(len(GENERAL_INSTRUCTIONS)))
    random.Random(seed).shuffle(order)
    rows = []
    for k in range(n):
        i = order[k % len(order)]
        rows.append({"prompt": [{"role": "user", "content": GENERAL_INSTRUCTIONS[i]}],
                     "task_id": f"{GENERAL_PREFIX}{i}"})
    return rows


def general_count(n_tasks: int, share: float) -> int:
    """How many general rows make them `share` of the mix."""
    return round(n_tasks * share / (1 - share)) if share > 0 else 0
