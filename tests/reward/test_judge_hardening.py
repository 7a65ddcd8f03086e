"""The openai judge against misbehaving servers: real local HTTP servers serving canned bad behaviours.

Covers secrets (the API key never shows in any error), bad replies (always JudgeError, never a
traceback), the total time limit of one call, and the cache key's endpoint.
"""

from __future__ import annotations

import json
import os
import threading
import time
import traceback
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote

import httpx
import pytest

from rubricrl.core.errors import ConfigError, JudgeError
from rubricrl.reward.judges.base import JudgeRequest
from rubricrl.reward.judges.cache import cache_key
from rubricrl.reward.judges.openai_judge import OpenAIJudge, Redactor, _short, parse_verdict
from rubricrl.reward.spec import Criterion
from rubricrl.config import JudgeConfig
from rubricrl.core.taskfile import Task
from tests.llama_server import free_port

KEY_ENV = "RUBRICRL_TEST_HARDENING_KEY"
TASK = Task(id="t-1", instruction="Extract the name.", text="Alice is here.",
            schema={"type": "object", "properties": {"name": {"type": "string"}}}, reference=None)
CRITERION = Criterion(id="faithful", kind="judge", judge="j", description="Values are in the text.",
                      range=(0, 3))
REQUEST = JudgeRequest(task=TASK, response='{"name": "Alice"}', parsed=None, criterion=CRITERION)
TRICKLE_S = 0.25  # one byte per this many seconds: every read is well inside any timeout used here


def chat(content) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


def spellings(key: str) -> list[str]:
    """The spellings of a key the tests look for; written out here, independent of the Redactor."""
    return [key, repr(key)[1:-1], quote(key, safe=""), json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1]]


def assert_hidden(key: str, *texts: str) -> None:
    for text in texts:
        for form in spellings(key):
            pieces = [form] if len(form) < 8 else [form[i:i + 8] for i in range(len(form) - 7)]
            shown = [p for p in pieces if p in text]
            assert not shown, f"key piece {shown[0]!r} shown in {text!r}"


def shown_texts(err: BaseException) -> tuple[str, str, str]:
    return str(err), repr(err), "".join(traceback.format_exception(err))


def _echo_forms(key: str) -> str:
    return f"raw={key} repr={key!r} pct={quote(key, safe='')} json={json.dumps(key)}"


class Handler(BaseHTTPRequestHandler):
    """POST /<behaviour>/chat/completions answers with that behaviour; the key is the bearer token sent."""

    protocol_version = "HTTP/1.1"
    hits: Counter = Counter()

    def log_message(self, *args):  # quiet
        pass

    def send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def trickle(self, data: bytes) -> None:
        for i in range(len(data)):
            self.wfile.write(data[i:i + 1])
            self.wfile.flush()
            time.sleep(TRICKLE_S)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        behaviour = self.path.strip("/").split("/")[0]
        Handler.hits[behaviour] += 1
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        try:
            getattr(self, "b_" + behaviour)(key)
        except OSError:  # the judge hung up (deadline, size cap): expected
            self.close_connection = True

    def b_ok(self, key):
        self.send(200, chat('{"reason": "fine", "score": 2}'))

    b_ok2 = b_ok

    def b_echo401(self, key):
        message = f"Incorrect API key provided: Bearer {key}. Your header: {self.headers['Authorization']!r}"
        self.send(401, json.dumps({"error": {"message": message}}).encode())

    def b_echo500cut(self, key):  # the key straddles the 200-character cut of error messages
        self.send(500, ("x" * 190 + key + " and " + _echo_forms(key)).encode(), "text/plain")

    def b_echo500forms(self, key):
        self.send(500, json.dumps({"error": {"message": "y" * 150 + _echo_forms(key)}}).encode())

    def b_unusable_echo(self, key):
        self.send(200, chat(f"I will not grade. {_echo_forms(key)}"))

    def b_notjson_echo(self, key):
        self.send(200, f"<html>proxy login for {_echo_forms(key)}</html>".encode(), "text/html")

    def b_trickle_body(self, key):
        body = chat('{"reason": "fine", "score": 2}')
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.trickle(body)

    def b_trickle_headers(self, key):
        self.trickle(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"z" * 100)

    def b_content_int(self, key):
        self.send(200, chat(3))

    def b_content_list(self, key):
        self.send(200, chat(['{"reason": "x", "score": 2}']))

    def b_content_obj(self, key):
        self.send(200, chat({"reason": "x", "score": 2}))

    def b_content_null(self, key):
        self.send(200, chat(None))

    def b_deep(self, key):
        self.send(200, b"[" * 100_000)

    def b_deep_content(self, key):
        self.send(200, chat("{" + '"a":[' * 50_000))

    def b_huge(self, key):
        self.send(200, chat("x" * (2 << 20)))

    def b_non_dict(self, key):
        self.send(200, b"[1, 2, 3]")

    def b_string_body(self, key):
        self.send(200, b'"score: 2"')

    def b_notjson(self, key):
        self.send(200, b'{"reason": "fine", "score": 2} but not JSON', "text/plain")

    def b_score_true(self, key):
        self.send(200, chat('{"reason": "x", "score": true}'))

    def b_score_false(self, key):
        self.send(200, chat('{"reason": "x", "score": false}'))

    def b_score_nan(self, key):
        self.send(200, chat('{"reason": "x", "score": NaN}'))

    def b_score_inf(self, key):
        self.send(200, chat('{"reason": "x", "score": Infinity}'))

    def b_score_1e400(self, key):
        self.send(200, chat('{"reason": "x", "score": 1e400}'))


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads, srv.block_on_close = True, False
    thread = threading.Thread(target=srv.serve_forever, kwargs=dict(poll_interval=0.05), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def make_judge(monkeypatch):
    judges = []

    def make(base_url: str, key: str | None = None, **overrides) -> OpenAIJudge:
        if key is not None and "\0" in key:  # a real environment cannot hold NUL: the judge still checks
            monkeypatch.setattr(os, "environ", {**os.environ, KEY_ENV: key})
        elif key is not None:
            monkeypatch.setenv(KEY_ENV, key)
        settings = dict(type="openai", base_url=base_url, model="judge-model", response_format="json_object",
                        cache_dir=None, backoff_s=0.0, max_retries=1, samples=1, timeout_s=5,
                        api_key_env=KEY_ENV if key is not None else None)
        judges.append(OpenAIJudge(JudgeConfig(**{**settings, **overrides})))
        return judges[-1]

    yield make
    for judge in judges:
        judge.close()


AWKWARD_VALID_KEYS = [
    "sk-\"quo'ted\\back\\slash%25per%cent%zz-Q7",
    "sk-long-" + "AbCdEfGhIjKlMnOpQrStUvWxYz" * 12,
]
BAD_KEYS = [
    ("sk-proj-Abcdefgh12345678\r\n", "holds a carriage return; strip it"),
    ("sk-proj-Abcdefgh12345678\n", "holds a line feed; strip it"),
    ("sk-proj-Abc\x00defgh12345678", "holds a NUL byte"),
    ("sk-proj-Abcdefgh\x7f12345678", "holds a control character"),
    ("sk-proj-\x85Abcdefgh12345678", "holds a control character"),
    ("sk-proj-ключ-Abcdefgh12345678", "holds a non-ASCII character"),
    (" sk-proj-Abcdefgh12345678", "leading or trailing whitespace"),
    ("sk-proj-Abcdefgh12345678\u00a0", "leading or trailing whitespace"),  # a no-break space
]


@pytest.mark.parametrize("key,problem", BAD_KEYS)
def test_a_bad_key_is_refused_without_showing_it(make_judge, key, problem):
    with pytest.raises(ConfigError) as err:
        make_judge("http://127.0.0.1:1/v1", key=key)
    assert f"environment variable {KEY_ENV} (api_key_env)" in str(err.value) and problem in str(err.value)
    assert_hidden(key, *shown_texts(err.value))


@pytest.mark.parametrize("key", [k for k, _ in BAD_KEYS] + AWKWARD_VALID_KEYS)
def test_redactor_hides_every_spelling_of_a_key(server, key):
    redact = Redactor(key)
    # The text httpx itself gives for a header it cannot send: the key as escaped bytes.
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}) as client:
            client.post(server + "/ok/chat/completions", json={})
        leak = ""
    except (httpx.HTTPError, UnicodeError) as err:
        leak = str(err)
    text = f"{leak} {_echo_forms(key)} {key.encode('utf-8')!r} half: {key[:12]}|{key[-12:]}"
    for cut in range(150, 210, 7):  # a key near the cut: redacting first leaves nothing to half-show
        clean = _short(redact("p" * cut + text))
        assert_hidden(key, clean, repr(clean))
    assert_hidden(key, redact(text))


@pytest.mark.parametrize("key", AWKWARD_VALID_KEYS)
@pytest.mark.parametrize("path,expect", [
    (None, "connection failed to"),
    ("trickle_body", "timed out after 0.4 s"),
    ("echo401", "HTTP 401"),
    ("echo500cut", "HTTP 500"),
    ("echo500forms", "HTTP 500"),
    ("unusable_echo", "unusable reply (no score in 0..3)"),
    ("notjson_echo", "unusable reply (not JSON)"),
])
def test_no_error_path_shows_the_key(server, make_judge, key, path, expect):
    base_url = f"{server}/{path}" if path else f"http://127.0.0.1:{free_port()}/v1"
    judge = make_judge(base_url, key=key, timeout_s=0.4)
    with pytest.raises(JudgeError) as err:
        judge.judge_batch([REQUEST])
    assert expect in str(err.value) and "task t-1, criterion faithful" in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert_hidden(key, *shown_texts(err.value))
    assert key not in repr(judge)


@pytest.mark.parametrize("path,expect", [
    ("content_int", "message content is a number, not text"),
    ("content_list", "message content is an array, not text"),
    ("content_obj", "message content is an object, not text"),
    ("content_null", "message content is null, not text"),
    ("deep", "unusable reply (not JSON)"),
    ("deep_content", "unusable reply (no score in 0..3)"),
    ("huge", f"unusable reply (over {1 << 20} bytes)"),
    ("non_dict", "unusable reply (not a chat completion)"),
    ("string_body", "unusable reply (not a chat completion)"),
    ("notjson", "unusable reply (not JSON)"),
    ("score_true", "unusable reply (no score in 0..3)"),
    ("score_false", "unusable reply (no score in 0..3)"),
    ("score_nan", "unusable reply (no score in 0..3)"),
    ("score_inf", "unusable reply (no score in 0..3)"),
    ("score_1e400", "unusable reply (no score in 0..3)"),
])
def test_a_bad_reply_is_a_judge_error_after_the_retries(server, make_judge, path, expect):
    judge = make_judge(f"{server}/{path}", max_retries=1)
    with pytest.raises(JudgeError) as err:
        judge.judge_batch([REQUEST])
    assert expect in str(err.value) and "2 attempt(s)" in str(err.value) and judge.calls == 2
    assert len(str(err.value)) < 500


@pytest.mark.parametrize("path", ["trickle_body", "trickle_headers"])
def test_timeout_is_a_total_deadline_per_call(server, make_judge, path):
    judge = make_judge(f"{server}/{path}", timeout_s=1, max_retries=0)
    start = time.monotonic()
    with pytest.raises(JudgeError, match=r"1 attempt\(s\): timed out after 1 s calling"):
        judge.judge_batch([REQUEST])
    assert time.monotonic() - start < 1.5


def test_parse_verdict_rejects_odd_scores_and_is_linear():
    for score in ("true", "false", "NaN", "-Infinity", "1e400", "9" * 5000, '"nan"', "null", "[2]"):
        assert parse_verdict(f'{{"reason": "x", "score": {score}}}', 0, 3) is None, score
    assert parse_verdict('{"reason": {"deep": [1]}, "score": 2}', 0, 3)["score"] == 2  # non-text reason: no crash
    assert parse_verdict('[{"x": 1}, {"verdict": {"reason": "ok", "score": 1}}]', 0, 3) == {"score": 1, "reason": "ok"}
    assert parse_verdict("{" * 5000 + ' {"reason": "ok", "score": 3}', 0, 3)["score"] == 3
    # Replies that made the old scan over every '{' quadratic (or hit RecursionError): each is ~1 MB.
    adversarial = ['{"a":[' * 200_000, '{"a": "' + "{" * 1_000_000, "{" + '"a":{' * 200_000, "[" * 1_000_000,
                   '{"' * 500_000, '{"x": 1}' * 125_000]
    for text in adversarial:
        start = time.monotonic()
        assert parse_verdict(text, 0, 3) is None
        assert time.monotonic() - start < 1.0, text[:20]


def test_cache_key_covers_the_endpoint(server, make_judge, tmp_path):
    parts = dict(base_url="http://a/v1", model="m", messages=[{"role": "user", "content": "x"}], sample=0,
                 temperature=0.0, max_tokens=64, response_format="auto")
    key = cache_key(**parts)
    assert cache_key(**{**parts, "base_url": "http://a/v1/"}) == key
    for name, other in [("base_url", "http://b/v1"), ("model", "n"), ("messages", [{"role": "user", "content": "y"}]),
                        ("sample", 1), ("temperature", 0.5), ("max_tokens", 65), ("response_format", "json_object")]:
        assert cache_key(**{**parts, name: other}) != key, name
    assert cache_key(**{**parts, "messages": [{"role": "user", "content": "\ud800"}]})  # lone surrogate: no crash

    Handler.hits.clear()
    first = make_judge(f"{server}/ok", cache_dir=str(tmp_path))
    assert [v.score for v in first.judge_batch([REQUEST])] == [2.0] and first.calls == 1
    again = make_judge(f"{server}/ok", cache_dir=str(tmp_path))
    assert again.judge_batch([REQUEST])[0].calls == 0 and again.calls == 0
    moved = make_judge(f"{server}/ok2", cache_dir=str(tmp_path))  # another endpoint: the cache must miss
    assert moved.judge_batch([REQUEST])[0].calls == 1
    assert Handler.hits == Counter(ok=1, ok2=1)


def test_a_cache_entry_that_does_not_parse_is_a_miss_said_once(server, make_judge, tmp_path, capsys):
    import sqlite3

    Handler.hits.clear()
    first = make_judge(f"{server}/ok", cache_dir=str(tmp_path))
    first.judge_batch([REQUEST])
    with sqlite3.connect(tmp_path / "judge.sqlite3") as db:  # a torn write, a foreign value, a wrong type
        keys = [k for (k,) in db.execute("SELECT key FROM samples")]
        assert keys
        db.execute("UPDATE samples SET value = ?", ('{"score": 2, "rea',))
    again = make_judge(f"{server}/ok", cache_dir=str(tmp_path))
    verdict = again.judge_batch([REQUEST])[0]
    assert verdict.score == 2.0 and verdict.calls == 1  # asked again, not a crash
    err = capsys.readouterr().err
    assert err.count("judge cache:") == 1 and "does not parse" in err and "treated as a miss" in err
    with sqlite3.connect(tmp_path / "judge.sqlite3") as db:
        db.execute("UPDATE samples SET value = ?", ('{"score": true, "reason": "x"}',))
    third = make_judge(f"{server}/ok", cache_dir=str(tmp_path))
    assert third.judge_batch([REQUEST])[0].calls == 1
    assert make_judge(f"{server}/ok", cache_dir=str(tmp_path)).judge_batch([REQUEST])[0].calls == 0  # replaced


@pytest.mark.parametrize("path,transient", [
    (None, True),  # nothing listens
    ("trickle_body", True),  # timed out
    ("echo500forms", True),  # HTTP 5xx
    ("echo401", False),  # a bad key: no wait heals it
    ("unusable_echo", False),  # it answered, with no verdict
])
def test_the_error_type_says_whether_the_endpoint_may_come_back(server, make_judge, path, transient):
    """JudgeUnavailable (a TransientError the flow retries) only when the endpoint did not answer."""
    from rubricrl.core.errors import JudgeUnavailable, TransientError

    base_url = f"{server}/{path}" if path else f"http://127.0.0.1:{free_port()}/v1"
    judge = make_judge(base_url, timeout_s=0.4)
    with pytest.raises(JudgeError) as err:
        judge.judge_batch([REQUEST])
    assert isinstance(err.value, JudgeUnavailable) is transient and isinstance(err.value, TransientError) is transient


def test_the_environments_openai_settings_never_reach_the_judge(server, make_judge, monkeypatch):
    """The openai client reads OPENAI_API_KEY (and organization, project) from the environment when not given
    them; the judge gives it its own key or a placeholder, so another service's key is never sent."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-Abcdefgh12345678")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-env")
    judge = make_judge(f"{server}/echo401")  # answers with the Authorization header it received
    with pytest.raises(JudgeError) as err:
        judge.judge_batch([REQUEST])
    assert "Bearer EMPTY" in str(err.value) and "sk-env" not in str(err.value)
