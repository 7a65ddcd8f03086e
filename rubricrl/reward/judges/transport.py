"""The openai judge's HTTP transport: the `openai` client over an HTTP client whose every call keeps a total
deadline.

The openai client makes the requests (and, once the server has answered a response format, retries failed calls
with its backoff and Retry-After handling). Its http client (httpx2) bounds each socket operation, not a call, so
a server that trickles its reply one byte at a time would hold a call for ever: here every socket read and write
waits no longer than the thread's deadline leaves, and the deadline starts when each request is sent (an
event hook, per attempt). httpx2 has no public way to choose the network backend of its connection pools; this
sets it on every pool of the client (proxy mounts included).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

import httpcore2
import httpx2

_deadline = threading.local()  # .at: the monotonic time by which this thread's HTTP call must be done


def within_deadline(timeout: float | None, expired: type[Exception]) -> float | None:
    """The time an operation may wait: its own timeout, cut to what the thread's deadline leaves."""
    at = getattr(_deadline, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise expired("the call's total time limit passed")
    return left if timeout is None else min(timeout, left)


def clear_deadline() -> None:
    _deadline.at = None


class _DeadlineStream(httpcore2.NetworkStream):
    """A connection whose every read and write waits no longer than the thread's deadline allows."""

    def __init__(self, stream: httpcore2.NetworkStream):
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, within_deadline(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, within_deadline(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore2.NetworkStream:
        timeout = within_deadline(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str):
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore2.NetworkBackend):
    def __init__(self, backend: httpcore2.NetworkBackend):
        self._backend = backend

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        timeout = within_deadline(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        timeout = within_deadline(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def deadline_http_client(timeout_s: float, max_connections: int, on_request: Callable[[], None]) -> httpx2.Client:
    """An httpx2 client (for openai's `http_client`) whose each call ends within timeout_s in all; `on_request` runs
    as each request (each attempt) is sent."""

    def start(request) -> None:
        _deadline.at = time.monotonic() + timeout_s
        on_request()

    client = httpx2.Client(timeout=timeout_s, limits=httpx2.Limits(max_connections=max_connections),
                           event_hooks={"request": [start]})
    for transport in (client._transport, *client._mounts.values()):
        pool = getattr(transport, "_pool", None)
        if isinstance(pool, httpcore2.ConnectionPool):
            pool._network_backend = _DeadlineBackend(pool._network_backend)
    return client


def openai_client(base_url: str, api_key: str | None, timeout_s: float, max_connections: int, max_retries: int,
                  on_request: Callable[[], None]):
    """The openai client of one judge endpoint, with the key it is given and no other: OPENAI_API_KEY,
    OPENAI_ORG_ID and OPENAI_PROJECT_ID of the environment never reach the judge. Without a key it sends the
    placeholder "EMPTY", as vLLM's documentation does for a server without one."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key or "EMPTY", organization="", project="", timeout=timeout_s,
                    max_retries=max_retries, http_client=deadline_http_client(timeout_s, max_connections, on_request))
    client.organization = client.project = None  # no OpenAI-Organization / OpenAI-Project header at all
    return client
