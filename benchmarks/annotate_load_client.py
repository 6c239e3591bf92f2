"""The load generator of benchmarks/annotate_load.py: one asyncio loop over raw keep-alive HTTP/1.1
connections (it costs little of the cores it shares with the stack), as a separate process.

Two scenarios, each a virtual annotator per connection:
- ``browser``: what the work page does. Logged in beforehand through the login form (``login``:
  GET the form, POST it with the CSRF token, keep the session and CSRF cookies); per level, GET
  /work/<c>/ once (the first panel), then repeat: POST /work/<c>/submit as htmx does
  (``HX-Request``, the ``X-CSRFToken`` header, the form fields ``task``, ``label``, ``seconds``)
  and read the next task from the panel that comes back. One submit-and-next is one request.
- ``api``: the JSON API with a token: POST .../next/, then POST .../tasks/<id>/vote/.
"""
from __future__ import annotations

import asyncio
import json
import re
import sys
import time
import zlib
from urllib.parse import urlencode

CSRF_INPUT = re.compile(rb'name="csrfmiddlewaretoken" value="([^"]+)"')
TASK_INPUT = re.compile(rb'name="task" value="(\d+)"')
ERRORS = (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError)
ACCURACY = 0.85  # each virtual annotator agrees with a task's planted label this often


def label(user, task) -> str:
    """A GOOD/BAD vote as a crowd gives them: every third task is planted BAD, the others GOOD, and
    each annotator gives the planted label 85% of the time (deterministic per annotator and task),
    so the model-based methods have disagreement to fit, as on a real campaign."""
    truth = "bad" if int(task) % 3 == 0 else "good"
    agrees = zlib.crc32(f"{user}:{task}".encode()) / 2**32 < ACCURACY
    return truth if agrees else ("good" if truth == "bad" else "bad")


class Conn:
    def __init__(self, port: int):
        self.port = port
        self.reader = self.writer = None
        self.cookies: dict[str, str] = {}

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def close(self):
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None

    async def request(self, method: str, path: str, body: bytes = b"", headers: dict | None = None):
        """(status, headers {lower name: [values]}, body); cookies set by the answer are kept."""
        if self.writer is None:
            await self.open()
        lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        if self.cookies:
            lines.append("Cookie: " + "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        status_line = await self.reader.readline()
        if not status_line:
            raise ConnectionError("connection closed by the server")
        status = int(status_line.split()[1])
        got: dict[str, list[str]] = {}
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            got.setdefault(name.strip().lower(), []).append(value.strip())
        if got.get("transfer-encoding", [""])[0].lower() == "chunked":
            data = b""
            while True:
                size = int((await self.reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self.reader.readline()
                    break
                data += await self.reader.readexactly(size)
                await self.reader.readline()
        else:
            length = int(got.get("content-length", ["0"])[0])
            data = await self.reader.readexactly(length) if length else b""
        for cookie in got.get("set-cookie", []):
            name, _, rest = cookie.partition("=")
            self.cookies[name.strip()] = rest.split(";", 1)[0]
        if got.get("connection", [""])[0].lower() == "close":  # a sync gunicorn worker closes after each answer
            self.close()
        return status, got, data


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


async def login(port: int, username: str, password: str, next_path: str) -> dict:
    """The login form, as a browser fills it: returns the session's cookies."""
    conn = Conn(port)
    try:
        status, _, page = await conn.request("GET", "/accounts/login/")
        token = CSRF_INPUT.search(page)
        if status != 200 or not token:
            raise RuntimeError(f"login page: HTTP {status}, CSRF token {'found' if token else 'missing'}")
        body = urlencode({"csrfmiddlewaretoken": token.group(1).decode(), "username": username,
                          "password": password, "next": next_path}).encode()
        status, headers, _ = await conn.request("POST", "/accounts/login/", body, FORM)
        if status != 302 or "sessionid" not in conn.cookies:
            raise RuntimeError(f"login of {username}: HTTP {status} (expected a redirect with a session)")
        return conn.cookies
    finally:
        conn.close()


async def _reopen(conn, work, out) -> bytes:
    """After an error, the work page again (as a person would reload it); b"" ends the loop."""
    try:
        status, _, page = await conn.request("GET", work)
        return page if status == 200 else b""
    except ERRORS as exc:
        out["errors"].append(f"reload: {exc!r}")
        return b""


async def _browser(port, campaign, user, cookies, deadline, out):
    conn = Conn(port)
    conn.cookies = dict(cookies)
    work = f"/work/{campaign}/"
    try:
        t0 = time.perf_counter()
        status, _, page = await conn.request("GET", work)
        out["open"].append(time.perf_counter() - t0)
        if status != 200:
            out["errors"].append(f"work page: HTTP {status}")
            return
        while time.monotonic() < deadline:
            token, task = CSRF_INPUT.search(page), TASK_INPUT.search(page)
            if task is None:
                out["finished"] += 1
                return
            headers = {**FORM, "HX-Request": "true", "HX-Target": "task-panel",
                       "X-CSRFToken": (token.group(1).decode() if token else conn.cookies.get("csrftoken", ""))}
            body = urlencode({"task": task.group(1).decode(), "label": label(user, task.group(1)),
                              "seconds": "1.0"}).encode()
            t0 = time.perf_counter()
            try:
                status, _, page = await conn.request("POST", f"/work/{campaign}/submit", body, headers)
            except ERRORS as exc:
                out["errors"].append(f"submit: {exc!r}")
                conn.close()
                page = await _reopen(conn, work, out)
                continue
            if status != 200:
                out["errors"].append(f"submit: HTTP {status} {page[:200]!r}")
                page = await _reopen(conn, work, out)
                continue
            out["pair"].append(time.perf_counter() - t0)
            out["acked"].append([int(task.group(1)), user])
    finally:
        conn.close()


async def _api(port, campaign, user, token, deadline, out):
    conn = Conn(port)
    auth = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
    try:
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            try:
                status, _, data = await conn.request("POST", f"/api/campaigns/{campaign}/next/", b"", auth)
                if status != 200:
                    out["errors"].append(f"next: HTTP {status} {data[:200]!r}")
                    continue
                body = json.loads(data)
                if body["task"] is None:
                    out["finished"] += 1
                    return
                task_id = body["task"]["id"]
                vote_body = json.dumps({"value": label(user, task_id), "seconds": 1.0}).encode()
                status, _, data = await conn.request("POST", f"/api/campaigns/{campaign}/tasks/{task_id}/vote/",
                                                     vote_body, auth)
            except ERRORS as exc:
                out["errors"].append(f"api: {exc!r}")
                conn.close()
                continue
            if status != 201:
                out["errors"].append(f"vote: HTTP {status} {data[:200]!r}")
                continue
            out["pair"].append(time.perf_counter() - t0)
            out["acked"].append([task_id, user])
    finally:
        conn.close()


async def _drive(port, scenario, campaign, clients, duration):
    out = {"open": [], "pair": [], "acked": [], "errors": [], "finished": 0}
    started = time.monotonic()
    deadline = started + duration
    if scenario == "browser":
        runs = [_browser(port, campaign, c["user"], c["cookies"], deadline, out) for c in clients]
    else:
        runs = [_api(port, campaign, c["user"], c["token"], deadline, out) for c in clients]
    await asyncio.gather(*runs)
    out["elapsed"] = time.monotonic() - started
    return out


async def _login_all(port, users, password, next_path):
    return await asyncio.gather(*[login(port, u, password, next_path) for u in users])


def main(argv) -> int:
    """``login PORT CAMPAIGN`` (stdin: {"users": [...], "password": ...}; stdout: cookies per user)
    or ``drive PORT SCENARIO CAMPAIGN SECONDS`` (stdin: the clients; stdout: the figures)."""
    if argv[0] == "login":
        port, campaign = int(argv[1]), int(argv[2])
        spec = json.loads(sys.stdin.read())
        cookies = asyncio.run(_login_all(port, spec["users"], spec["password"], f"/work/{campaign}/"))
        json.dump(cookies, sys.stdout)
        return 0
    port, scenario, campaign, duration = int(argv[1]), argv[2], int(argv[3]), float(argv[4])
    clients = json.loads(sys.stdin.read())
    json.dump(asyncio.run(_drive(port, scenario, campaign, clients, duration)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
