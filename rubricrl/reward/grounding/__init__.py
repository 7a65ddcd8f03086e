"""Source grounding: is an extracted value supported by the source text?

Normalises case, width (NFKC: full-width Chinese digits and punctuation), whitespace, thousands
separators, decimals and numbers with units or Chinese multipliers (万, 亿). Used by the
deterministic faithfulness judge and the invented-value penalty, so it must be fast: a Source is
built once per text and reused for every response.

Without a reference, "supported" means the text states the value:
  * a number is one the text writes (with its multiplier: "3.5万" is 35000 and 3.5), or that number
    scaled by a unit conversion the task asks for *for that field* (FieldRule.factors, derived by
    field_rules from the constraints and the property description: "Give weight_g in grams." allows
    x1000 and /1000). Nothing is scaled blindly: 2999 -> 2999000 is not in a text that says 2999;
  * a string is a span of one sentence of the text (or, for a multi-word value, its words all in one
    sentence). A string that copies across a sentence boundary, or is far longer than a field value
    (copy_problem), is not an extraction;
  * a reformatted date (YYYY-MM-DD) or time (HH:MM) counts when a constraint or schema pattern of the
    task asks for that format and the text gives the same day / time ("March 5, 2024", "下午3点半");
    without such a request it does not (only a span of the text does). Dates without a year never do.
A value with a hedge ("about 2999", "约25") is no number at all (parse_number), so it never matches a
numeric gold answer either.
"""

from rubricrl.reward.grounding.dates import text_dates, text_times
from rubricrl.reward.grounding.fields import STRICT, FieldRule, field_rules, rules_for
from rubricrl.reward.grounding.numbers import UNIT_WHITELIST, extract_numbers, numbers_equal, parse_number
from rubricrl.reward.grounding.source import Source, source_for, values_match
from rubricrl.reward.grounding.text import (
    COPY_MAX_CHARS, COPY_MAX_CJK_CHARS, COPY_MAX_WORDS, clear_caches, copy_problem, iter_sentences, normalize_text,
    split_sentences,
)

__all__ = ["COPY_MAX_CHARS", "COPY_MAX_CJK_CHARS", "COPY_MAX_WORDS", "STRICT", "UNIT_WHITELIST", "FieldRule", "Source",
           "clear_caches", "copy_problem", "extract_numbers", "field_rules", "iter_sentences", "normalize_text",
           "numbers_equal", "parse_number", "rules_for", "source_for", "split_sentences", "text_dates", "text_times",
           "values_match"]
