"""The OpenAI-compatible chat-completions client of Frontier's language-model
programs (frontier-llm-proposer, frontier-llm-kernels; docs/proposers.md),
standard library only.

POST <endpoint>/chat/completions, tried at most 1 + retries times on 429,
5xx, timeouts and connection failures (waiting 0.25 s, 0.5 s, ... 4 s, or
what Retry-After asks on 429/503, at most RETRY_AFTER_CAP); 401, 403, 404 and
other 4xx are ModelUnusable at once, with a message that names the flag to
check. Every request is counted (calls, latency) and the tokens of every
response that reports `usage` (error responses too). A caller with a time
budget sets `deadline` (a time.monotonic() value: no request runs past it,
OutOfTime when none fits) and `cancelled` (a function: true once the caller
has given up, then Cancelled and no further request); abort() closes the
request in flight from another thread. The key is sent only in the
Authorization header and never in a message (redact).
"""

import email.utils
import http
import http.client
import json
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request

RESPONSE_CAP = 2 << 20      # bytes of one HTTP response body read (the JSON around the answer)
RETRY_AFTER_CAP = 30.0      # seconds of Retry-After honoured; longer: the model cannot be used now
MIN_CALL_S = 0.2            # a request given less time than this is not sent


class KeyFileError(Exception):
    """The API key file cannot be read or is empty."""


class AnswerTooLong(Exception):
    """A 200 response over RESPONSE_CAP: an answer that cannot be read."""


class ModelUnusable(Exception):
    """The model cannot be used (unreachable, auth, wrong model or path, persistent errors). `status`: the
    HTTP status that said so (None: no answer), `detail`: the start of its body."""

    def __init__(self, message, status=None, detail=""):
        super().__init__(message)
        self.status = status
        self.detail = detail


class OutOfTime(ModelUnusable):
    """The caller's deadline leaves no time for (another) request."""


class Cancelled(ModelUnusable):
    """The caller gave up (cancelled() or abort()): no further request is sent."""


def read_key(path):
    """The key in `path` (stripped), else FRONTIER_LLM_API_KEY, else ""; KeyFileError for a bad file."""
    if path:
        try:
            with open(path) as f:
                key = f.read().strip()
        except OSError as e:
            raise KeyFileError(f"cannot read --api-key-file {path}: {e.strerror or e}") from None
        if not key:
            raise KeyFileError(f"--api-key-file {path} is empty")
        return key
    return os.environ.get("FRONTIER_LLM_API_KEY", "")


def check_endpoint(endpoint):
    """None when `endpoint` is an http(s) base URL with a host, else what is wrong with it."""
    if not endpoint.strip():
        return "--endpoint is empty"
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"--endpoint {endpoint!r} must be an http:// or https:// URL, e.g. http://127.0.0.1:8080/v1"
    try:
        parts.port
    except ValueError:
        return f"--endpoint {endpoint!r} has a port that is not a number"
    return None


def strip_reasoning(text):
    """The answer without a <think>...</think> prefix; None when it is all reasoning (never closed)."""
    stripped = text.lstrip()
    if stripped.startswith("<think>"):
        end = stripped.find("</think>")
        return None if end < 0 else stripped[end + len("</think>"):]
    end = text.find("</think>")
    if end >= 0 and "<think>" not in text[:end]:  # the opening tag was part of the chat template
        return text[end + len("</think>"):]
    return text


_OPEN = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*([^\n]*)$")


def fenced_blocks(text):
    """Every fenced block: [(language, code, closed)], in order."""
    blocks = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        if not m or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        language = info.split()[0].strip("{}.").lower() if info else ""
        close = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        body, i, closed = [], i + 1, False
        while i < len(lines):
            if close.match(lines[i]):
                closed = True
                i += 1
                break
            line = lines[i]
            body.append(line[len(indent):] if indent and line.startswith(indent) else line)
            i += 1
        blocks.append((language, "\n".join(body), closed))
    return blocks


def _phrase(code):
    try:
        return http.HTTPStatus(code).phrase
    except ValueError:
        return ""


def _retry_after(headers):
    """Seconds a Retry-After header asks for (delta-seconds or an HTTP date), None without one."""
    value = (headers.get("Retry-After", "") if headers else "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


class ChatClient:
    """POST <endpoint>/chat/completions with bounded retries; counts calls, latency and tokens."""

    def __init__(self, endpoint, model, key, timeout_s, retries, temperature, max_tokens=0):
        self.url = endpoint.rstrip("/") + "/chat/completions"
        self.model = model
        self._key = key
        self.timeout_s = timeout_s
        self.retries = retries
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.latency_ms = 0
        self._wake = threading.Event()    # set by abort(): a wait between tries ends at once
        self.sleep = self._wake.wait
        self.deadline = None              # time.monotonic() past which no request runs
        self.cancelled = lambda: False    # true once the caller has given up
        self.on_retry = None              # called with (request number, why it failed) before another try
        self._lock = threading.Lock()
        self._conn = None                 # of the request in flight
        self._aborted = False

    def __repr__(self):  # never the key
        return f"ChatClient({self.url}, model={self.model})"

    def redact(self, text):
        return text.replace(self._key, "***") if self._key else text

    def abort(self):
        """Closes the request in flight (from another thread); later asks raise Cancelled."""
        with self._lock:
            self._aborted = True
            conn = self._conn
        self._wake.set()
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _gave_up(self):
        return self._aborted or self.cancelled()

    def _count_usage(self, data):
        usage = data.get("usage") if isinstance(data, dict) else None
        if isinstance(usage, dict):
            for field in ("prompt_tokens", "completion_tokens"):
                value = usage.get(field)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                    setattr(self, field, getattr(self, field) + int(value))

    def _connection(self, timeout):
        parts = urllib.parse.urlsplit(self.url)
        host, port, https = parts.hostname, parts.port, parts.scheme == "https"
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        proxy = urllib.request.getproxies().get(parts.scheme)
        if proxy and not urllib.request.proxy_bypass(host):
            p = urllib.parse.urlsplit(proxy if "//" in proxy else "http://" + proxy)
            if https:
                conn = http.client.HTTPSConnection(p.hostname, p.port or 3128, timeout=timeout,
                                                   context=ssl.create_default_context())
                conn.set_tunnel(host, port or 443)
            else:
                conn = http.client.HTTPConnection(p.hostname, p.port or 3128, timeout=timeout)
                target = self.url
        elif https:
            conn = http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl.create_default_context())
        else:
            conn = http.client.HTTPConnection(host, port, timeout=timeout)
        return conn, target

    def _send(self, body, timeout):
        """(status, headers, payload) of one request; raises TimeoutError, OSError, HTTPException, Cancelled."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = "Bearer " + self._key
        conn, target = self._connection(timeout)
        with self._lock:
            if self._aborted:
                raise Cancelled("cancelled before the request")
            self._conn = conn
        deadline = time.monotonic() + timeout
        try:
            conn.request("POST", target, body=json.dumps(body).encode(), headers=headers)
            response = conn.getresponse()
            limit = RESPONSE_CAP if response.status == 200 else 64 * 1024
            chunks, size = [], 0  # each wait is bounded by the socket's timeout, the whole read by the deadline
            while size <= limit:
                if time.monotonic() > deadline:
                    raise TimeoutError("the answer did not arrive in time")
                chunk = response.read1(min(64 * 1024, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return response.status, response.headers, b"".join(chunks)
        except (OSError, http.client.HTTPException):
            if self._aborted:
                raise Cancelled("the request was closed: the caller gave up") from None
            raise
        finally:
            with self._lock:
                self._conn = None
            conn.close()

    def _time_for_call(self, last):
        """The timeout of the next request; OutOfTime/Cancelled when there is none."""
        if self._gave_up():
            raise Cancelled("the caller gave up" + (f" (last: {last})" if last else ""))
        if self.deadline is None:
            return self.timeout_s, False
        left = self.deadline - time.monotonic()
        if left < MIN_CALL_S:
            raise OutOfTime((f"{last}; " if last else "") + "no time left within the deadline for another call")
        return (left, True) if left < self.timeout_s else (self.timeout_s, False)

    def ask(self, messages, extra=None, tries=None):
        """(content, finish_reason) of one answered call (content may be ""); ModelUnusable when none comes.
        `extra`: more fields of the request body; `tries`: requests at most (default 1 + retries)."""
        body = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if self.max_tokens > 0:
            body["max_tokens"] = self.max_tokens
        body.update(extra or {})
        last = ""
        tries = 1 + self.retries if tries is None else tries
        for attempt in range(tries):
            timeout, by_deadline = self._time_for_call(last)
            self.calls += 1
            wait = min(0.25 * 2 ** attempt, 4.0)
            started = time.monotonic()
            within = (f"within the {timeout:.3g} s left of the deadline" if by_deadline
                      else f"within --timeout-s {self.timeout_s:g}")
            try:
                status, headers, payload = self._send(body, timeout)
            except (TimeoutError, socket.timeout):
                last = f"no answer from {self.url} {within}"
                status = None
            except (http.client.HTTPException, OSError) as e:
                last = f"could not reach the model server at {self.url}: {e}"
                status = None
            finally:
                self.latency_ms += int((time.monotonic() - started) * 1000)
            if status is not None:
                try:
                    data = json.loads(payload) if payload else None
                except ValueError:
                    data = None
                self._count_usage(data)
                if status == 200:
                    if len(payload) > RESPONSE_CAP:
                        raise AnswerTooLong(f"the response is longer than {RESPONSE_CAP >> 20} MiB: not read")
                    try:
                        choice = data["choices"][0]
                        content = choice["message"].get("content")
                    except (TypeError, KeyError, IndexError, AttributeError):
                        last = "the model server answered 200 with no chat-completions message"
                    else:
                        if isinstance(content, list):  # content parts
                            content = "".join(p.get("text", "") for p in content
                                              if isinstance(p, dict) and isinstance(p.get("text"), str))
                        return (content if isinstance(content, str) else ""), choice.get("finish_reason")
                else:
                    raw = payload[:2000].decode("utf-8", "replace")
                    detail = " ".join(raw.split())[:300]
                    said = f"the model server answered {status} {_phrase(status)}".rstrip()
                    if status == 401:
                        raise ModelUnusable(said + (": check --api-key-file (or FRONTIER_LLM_API_KEY)" if self._key
                                                    else ": no API key was given: pass --api-key-file or set "
                                                         "FRONTIER_LLM_API_KEY"), status, raw)
                    if status == 403:
                        raise ModelUnusable(f"{said}: the API key may not use model '{self.model}' at {self.url}"
                                            + (f" ({detail})" if detail else ""), status, raw)
                    if status == 404:
                        raise ModelUnusable(f"{said} at {self.url}: check --endpoint (the base URL, ending in /v1) "
                                            f"and --model '{self.model}'" + (f" ({detail})" if detail else ""),
                                            status, raw)
                    if status != 429 and status < 500:
                        raise ModelUnusable(said + (f": {detail}" if detail else ""), status, raw)
                    last = said + (f": {detail}" if detail else "")
                    if status in (429, 503):
                        after = _retry_after(headers)
                        if after is not None:
                            if after > RETRY_AFTER_CAP:
                                raise ModelUnusable(f"{said} and asks to wait {after:.0f} s (Retry-After), more "
                                                    f"than {RETRY_AFTER_CAP:.0f} s", status, raw)
                            wait = after
            if attempt + 1 < tries:
                if self.on_retry:
                    self.on_retry(self.calls, self.redact(last))
                if self.deadline is not None and time.monotonic() + wait + MIN_CALL_S > self.deadline:
                    raise OutOfTime(f"{last} ({attempt + 1} tr{'y' if attempt == 0 else 'ies'}; no time left "
                                    "within the deadline for another)")
                self.sleep(wait)
        if self._gave_up():
            raise Cancelled(f"the caller gave up (last: {last})")
        raise ModelUnusable(f"{last} ({tries} tr{'y' if tries == 1 else 'ies'})")
