"""A judge behind any OpenAI-compatible chat endpoint (vLLM, llama.cpp server, hosted APIs), through the `openai`
client (rubricrl.reward.judges.transport). What it shares with the checklist's judge panel (the response-format
fallback, the fence, the key's check and redaction, the error text) is rubricrl.inference.endpoint's.

Each verdict is the median of up to `samples` scores (sample i sent with seed=i), stopping early when
the first two agree. Samples are cached on disk, requests run on a bounded thread pool, transient
failures are retried with backoff, and anything that still fails raises JudgeError, never a 0: JudgeUnavailable
(a TransientError, which the flow retries) when the endpoint did not answer (timeout, connection, HTTP 429/5xx).

Retries: until the server has answered the current response format once, each failed call is retried here
(backoff_s, doubling, at most 10 s), since a 5xx may only mean the format is refused (llama.cpp answers
json_schema with HTTP 500) and the next format is tried at once; after that the openai client retries failed
calls itself (its backoff, Retry-After honoured). An unusable reply (no verdict in it) is asked again here, with a
new seed. Either way one verdict makes at most max_retries + 1 calls per sample.

Bounded cost: `timeout_s` is the total time of one HTTP call (connect, send, and the whole reply), and a
reply is read to at most MAX_REPLY_BYTES. A timed-out, failed or unusable call is retried like any other
failure, so one verdict takes at most
    samples x (max_retries + 1) x timeout_s  +  samples x the backoffs (min(backoff_s x 2^k, 10 s), k < max_retries)
plus, once per judge with response_format auto, up to two calls (each within timeout_s) that find the format
the server accepts. Verdicts run `concurrency` at a time.

Secrets: the API key is checked when the judge is built (endpoint.check_api_key), and every JudgeError is built by
OpenAIJudge._error, which redacts the key in all its spellings (and any 8+ character piece of one)
before any text is cut (endpoint.Redactor).
"""

from __future__ import annotations

import json
import os
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from rubricrl.config import JudgeConfig
from rubricrl.core.errors import ConfigError, JudgeError, JudgeUnavailable
from rubricrl.inference.endpoint import Redactor, ResponseFormats, backoff_s, check_api_key, error_text
from rubricrl.inference.endpoint import short as _short  # noqa: F401 (the hardening tests' import)
from rubricrl.reward.judges.base import ItemGrades, ItemRequest, JudgeRequest, Verdict
from rubricrl.reward.judges.cache import JudgeCache, cache_key
from rubricrl.reward.judges.prompt import (  # noqa: F401
    build_item_messages, build_judge_messages, fence, items_schema, score_range, verdict_schema)
from rubricrl.reward.judges.transport import clear_deadline, openai_client, within_deadline
from rubricrl.reward.judges.verdict import parse_item_grades, parse_verdict  # noqa: F401

MAX_REPLY_BYTES = 1 << 20  # a longer reply body fails the call
T = TypeVar("T")


def same_model(a: str, b: str) -> bool:
    """True when two model names/paths plausibly name the same model."""
    def forms(name: str) -> tuple[str, str, str]:
        name = name.strip().rstrip("/\\")
        return name.lower(), os.path.realpath(name).lower(), os.path.basename(name).lower()

    return any(x == y for x, y in zip(forms(a), forms(b)))


class OpenAIJudge:
    name = "openai"

    def __init__(self, config: JudgeConfig, policy_model: str | None = None):
        if not (config.base_url and config.model):
            raise ConfigError("an openai judge needs base_url and model")
        if policy_model and same_model(config.model, policy_model):
            raise ConfigError(
                f"judge model '{config.model}' is the policy model '{policy_model}': a model must not grade itself"
            )
        self.config = config
        key = os.environ.get(config.api_key_env) if config.api_key_env else None
        self._redact = Redactor(key)
        if config.api_key_env:
            if not key:
                raise self._error(
                    f"judge {config.model}: environment variable {config.api_key_env} (api_key_env) is not set"
                )
            check_api_key(config.api_key_env, key)
        self._client = openai_client(config.base_url, key, config.timeout_s, config.concurrency, config.max_retries,
                                     self._count_call)
        self._once = self._client.with_options(max_retries=0)  # until the format has been answered (module doc)
        self._cache = JudgeCache(config.cache_dir) if config.cache_dir else None
        self._formats = ResponseFormats(config.response_format)
        self._lock = threading.Lock()
        self._local = threading.local()  # .calls: HTTP calls made by this thread
        self.calls = 0  # HTTP calls made, failed ones included
        self.verdicts = 0
        self._started = 0  # verdicts past their first sample, for the audit rhythm of adaptive sampling
        self._agree_streak = 0  # fully sampled verdicts in a row whose samples all agreed

    def __repr__(self) -> str:  # never the key
        c = self.config
        return f"OpenAIJudge(model={c.model!r}, base_url={c.base_url!r}, api_key_env={c.api_key_env!r})"

    @property
    def response_format(self) -> str:
        return self._formats.current

    def _count_call(self) -> None:
        """Runs as each HTTP request is sent (the openai client's own retries included), in the calling thread."""
        with self._lock:
            self.calls += 1
        self._local.calls = getattr(self._local, "calls", 0) + 1

    def close(self) -> None:
        self._client.close()
        if self._cache:
            self._cache.close()

    def judge_batch(self, requests: list[JudgeRequest]) -> list[Verdict]:
        return self._each(self._judge_one, requests)

    def _each(self, fn: Callable[[T], object], requests: list) -> list:
        """fn of every request, `concurrency` at a time, in order; the first failure cancels the rest."""
        with ThreadPoolExecutor(self.config.concurrency) as pool:
            futures = [pool.submit(fn, r) for r in requests]
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

    def _judge_one(self, request: JudgeRequest) -> Verdict:
        cfg = self.config
        messages = build_judge_messages(request)
        lo, hi = score_range(request.criterion)
        samples, calls = [], 0
        for i in range(cfg.samples):
            if i == 1 and self._single_sample_enough():
                break
            if i == 2 and samples[0]["score"] == samples[1]["score"]:
                break  # the first two agree: stop early (a third could not move a median of three)
            key = cache_key(base_url=cfg.base_url, model=cfg.model, messages=messages, sample=i,
                            temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                            response_format=cfg.response_format)
            sample = self._cache.get(key) if self._cache else None
            if sample is None:
                sample, n = self._sample(request, messages, i, lo, hi)
                calls += n
                if self._cache:
                    self._cache.put(key, sample)
            samples.append(sample)
        scores = [s["score"] for s in samples]
        median = statistics.median(scores)
        reason = min(samples, key=lambda s: abs(s["score"] - median))["reason"]  # first closest
        with self._lock:
            self.verdicts += 1
            if len(scores) > 1:
                self._agree_streak = self._agree_streak + 1 if len(set(scores)) == 1 else 0
        return Verdict(score=float(median), reason=reason, samples=[float(s) for s in scores], calls=calls)

    def grade_items(self, requests: list[ItemRequest]) -> list[ItemGrades]:
        """Verdicts on batches of a free-text task's items (each request one call per sample), `concurrency` at a
        time. Per item the majority of up to `samples` samples (seed i each), stopping after two that agree on
        every item; cached, retried and bounded like a criterion's verdict."""
        return self._each(self._grade_one, requests)

    def _grade_one(self, request: ItemRequest) -> ItemGrades:
        cfg = self.config
        ids = [i.id for i in request.items]
        messages = build_item_messages(request)
        schema = items_schema(ids, cfg.max_tokens)
        what = f"task {request.task.id}, items {', '.join(ids)}"
        samples, calls = [], 0
        for i in range(cfg.samples):
            if i == 1 and self._single_sample_enough():
                break
            if i == 2 and all(samples[0][k]["met"] == samples[1][k]["met"] for k in ids):
                break  # the first two agree on every item: a third could not change a majority
            key = cache_key(base_url=cfg.base_url, model=cfg.model, messages=messages, sample=i,
                            temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                            response_format=cfg.response_format)
            sample = self._cache.get(key, lambda v: _grades_of(v, ids)) if self._cache else None
            if sample is None:
                sample, n = self._call(messages, i, schema, lambda text: parse_item_grades(text, ids), what,
                                       "no verdict for every item")
                calls += n
                if self._cache:
                    self._cache.put(key, sample)
            samples.append(sample)
        met = {k: 2 * sum(s[k]["met"] for s in samples) > len(samples) for k in ids}
        reasons = {k: next(s[k]["reason"] for s in samples if s[k]["met"] == met[k]) for k in ids}
        with self._lock:
            self.verdicts += 1
            if len(samples) > 1:
                agree = all(len({s[k]["met"] for s in samples}) == 1 for k in ids)
                self._agree_streak = self._agree_streak + 1 if agree else 0
        return ItemGrades(met=met, reasons=reasons, calls=calls, samples=len(samples))

    def _single_sample_enough(self) -> bool:
        """With adaptive_samples: one sample once the judge has proven consistent.

        After `warmup_verdicts` verdicts in a row whose samples all agreed, the first sample is the
        median-of-k score; every `audit_every`-th verdict still takes all samples, and one
        disagreement returns to full sampling until the judge proves consistent again. Decided after
        the first sample, so concurrent verdicts see the latest streak.
        """
        cfg = self.config
        if not cfg.adaptive_samples:
            return False
        with self._lock:
            self._started += 1
            return self._agree_streak >= cfg.warmup_verdicts and self._started % cfg.audit_every != 0

    def _sample(self, request: JudgeRequest, messages: list[dict], index: int, lo: int, hi: int) -> tuple[dict, int]:
        """One parsed sample and the HTTP calls it took; JudgeError once the retries are spent."""
        what = f"task {request.task.id}, criterion {request.criterion.id}"
        return self._call(messages, index, verdict_schema(lo, hi, self.config.max_tokens), lambda text: parse_verdict(text, lo, hi),
                          what, f"no score in {lo}..{hi}")

    def complete_json(self, messages: list[dict], schema: dict, parse: Callable[[str], T | None], what: str) -> T:
        """Any structured request (e.g. rubric proposals) with the same formats, retries and errors."""
        return self._call(messages, 0, schema, parse, what, "reply does not parse")[0]

    def _call(self, messages: list[dict], seed: int, schema: dict, parse: Callable[[str], T | None],
              what: str, unusable: str) -> tuple[T, int]:
        import httpx2
        from openai import APIConnectionError, APIStatusError, APITimeoutError, OpenAIError

        cfg = self.config
        failures = unparsed = 0
        before = getattr(self._local, "calls", 0)
        while True:
            fmt, proven = self._formats.state()  # the openai client retries only once the format has been answered
            # A retry after an unusable reply gets a new seed: the same seed would give the same reply.
            body = self._body(messages, seed + 1000 * unparsed, fmt, schema)
            retryable = backoff = True
            unavailable = True  # the endpoint did not answer usefully: transient (JudgeUnavailable)
            detail = None  # untrusted text for the error message
            try:
                status, data, complete = self._post(body, proven)
            except (APITimeoutError, TimeoutError, httpx2.TimeoutException):  # the latter two: while the body arrived
                cause = f"timed out after {cfg.timeout_s:g} s calling {cfg.base_url}"
                retryable = not proven  # the openai client has retried it already
            except (APIConnectionError, httpx2.TransportError) as err:
                cause, detail = f"connection failed to {cfg.base_url}", str(err.__cause__ or err) or type(err).__name__
                retryable = not proven
            except APIStatusError as err:
                status, data = err.status_code, err.response.content
                if self._formats.rejected(fmt, status):
                    continue  # not a failure: the next format is tried at once
                cause, detail = f"HTTP {status}", error_text(data)
                retryable = unavailable = status == 429 or status >= 500  # other 4xx will not heal
                retryable = retryable and not proven  # ... and a 429 or 5xx the openai client has retried already
            except OpenAIError as err:
                cause, detail = f"request to {cfg.base_url} failed", f"{type(err).__name__}: {err}"
                retryable = unavailable = False  # a malformed request or URL: no wait heals it
            else:
                self._formats.answered(fmt)
                try:
                    text = _reply_content(data, complete)
                except ValueError as err:
                    cause, detail = f"unusable reply ({err})", data.decode("utf-8", "replace")
                else:
                    parsed = parse(text)
                    if parsed is not None:
                        return parsed, self._calls_since(before)
                    cause, detail, backoff = f"unusable reply ({unusable})", text, False
                    unparsed += 1
                unavailable = False  # it answered; what it said is no verdict
            failures += 1
            if not retryable or failures > cfg.max_retries:
                calls = self._calls_since(before)
                raise self._error(f"openai judge {cfg.model}: {what}: no verdict after {calls} attempt(s): {cause}",
                                  detail, JudgeUnavailable if unavailable else JudgeError) from None
            if backoff:
                time.sleep(backoff_s(cfg.backoff_s, failures))

    def _calls_since(self, before: int) -> int:
        """HTTP calls this thread made since `before` (each request runs in one thread of the pool)."""
        return self._local.calls - before if hasattr(self._local, "calls") else 0

    def _post(self, body: dict, proven: bool) -> tuple[int, bytes, bool]:
        """Status, body (up to MAX_REPLY_BYTES) and whether that is all of it, each call within timeout_s in all.
        A non-2xx answer raises the openai client's APIStatusError."""
        client = self._client if proven else self._once
        extra = {k: body.pop(k) for k in ("response_format",) if k in body}  # sent as given (llama.cpp's schema key)
        try:
            with client.chat.completions.with_streaming_response.create(**body, extra_body=extra or None) as resp:
                data = bytearray()
                for chunk in resp.iter_bytes():
                    data += chunk
                    if len(data) > MAX_REPLY_BYTES:
                        return resp.status_code, bytes(data[:MAX_REPLY_BYTES]), False
                    within_deadline(None, TimeoutError)  # also holds should the backend hook be missing
                return resp.status_code, bytes(data), True
        finally:
            clear_deadline()

    def _error(self, message: str, detail: str | None = None, kind: type[JudgeError] = JudgeError) -> JudgeError:
        """Every JudgeError is built here: the key is redacted before text is cut, quoted or shown.

        detail, untrusted text (a reply, an error body), is shown as a repr() of one short line, so it can
        neither break the line nor send terminal escapes (Redactor.message).
        """
        return kind(self._redact.message(message, detail))

    def _body(self, messages: list[dict], seed: int, fmt: int, schema: dict) -> dict:
        body = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": self.config.max_tokens,
            "seed": seed,
        }
        response_format = self._formats.response_format(fmt, schema, "reply")  # fmt: an index (ResponseFormats)
        if response_format is not None:
            body["response_format"] = response_format
        return body


def _grades_of(sample, ids: list[str]) -> bool:
    return isinstance(sample, dict) and set(sample) == set(ids) and all(
        isinstance(v, dict) and isinstance(v.get("met"), bool) and isinstance(v.get("reason"), str)
        for v in sample.values())


def _reply_content(data: bytes, complete: bool) -> str:
    """choices[0].message.content of a chat completion; ValueError saying what is wrong with the reply."""
    if not complete:
        raise ValueError(f"over {MAX_REPLY_BYTES} bytes")
    try:
        reply = json.loads(data)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise ValueError("not JSON") from None
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise ValueError("not a chat completion") from None
    if not isinstance(content, str):
        kind = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", list: "an array",
                dict: "an object"}.get(type(content), type(content).__name__)
        raise ValueError(f"message content is {kind}, not text")
    return content
