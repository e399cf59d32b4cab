"""The real Gemini CLI, offline: a scripted model server, a leak guard, and a runner.

- `ScriptedModel`: a real HTTP server on 127.0.0.1 that speaks the Gemini API the CLI calls
  (`models/M:streamGenerateContent?alt=sse` for the agent's turns, `models/M:generateContent`
  for its utility calls such as model routing, `countTokens`). Each agent request gets the
  next `Step` of the script: text, or function calls (tools the CLI then runs). Every
  request is recorded; a request the script did not expect is an error the test reports.
- `LeakGuard`: a loopback HTTP proxy named in HTTP(S)_PROXY / ALL_PROXY for the CLI, with
  NO_PROXY covering only loopback. Anything the CLI would send off the machine (telemetry,
  update checks, Google APIs) reaches it instead; the test asserts it saw nothing.
- `GeminiCli`: a temporary HOME with the CLI's settings (API-key auth with a fake key,
  telemetry, usage statistics and update checks off), the project folder trusted, greenloop
  on PATH as this checkout; `turn(prompt, …)` runs `gemini -p … --yolo -o json` once.

The CLI is pinned in tests/harnesses/gemini-cli (package.json + package-lock.json; `npm ci`
there installs it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from .helpers import REPO

GEMINI_VERSION = "0.61.0"
GEMINI_PACKAGE = REPO / "tests" / "harnesses" / "gemini-cli" / "node_modules" / "@google" / "gemini-cli"
GEMINI_JS = GEMINI_PACKAGE / "bundle" / "gemini.js"


def require_gemini() -> tuple[str, Path]:
    """node and the pinned CLI's entry point, or skip saying how to install them."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    if not GEMINI_JS.is_file():
        pytest.skip("Gemini CLI is not installed: run `npm ci` in tests/harnesses/gemini-cli")
    version = json.loads((GEMINI_PACKAGE / "package.json").read_text())["version"]
    assert version == GEMINI_VERSION, f"tests/harnesses/gemini-cli holds {version}; run `npm ci` there"
    return node, GEMINI_JS


class Step(NamedTuple):
    """The model's answer to one agent request.

    `text` or `calls` ((tool name, args) pairs, answered as functionCall parts); `expect` is
    text (or texts) the request's last user content must contain (what the CLI just sent).
    """

    text: str | None = None
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    expect: str | tuple[str, ...] | None = None


def say(text: str, expect: str | tuple[str, ...] | None = None) -> Step:
    return Step(text=text, expect=expect)


def call(name: str, args: dict[str, Any] | None = None, expect: str | tuple[str, ...] | None = None) -> Step:
    return Step(calls=((name, args or {}),), expect=expect)


@dataclass
class Request:
    path: str
    body: dict[str, Any]

    @property
    def agent(self) -> bool:
        return ":streamGenerateContent" in self.path

    def last_user_text(self) -> str:
        """The text of the last content the CLI sent (the user's turn, a tool result, or a
        hook's reason)."""
        contents = self.body.get("contents") or []
        return json.dumps(contents[-1], ensure_ascii=False) if contents else ""

    def text(self) -> str:
        return json.dumps(self.body, ensure_ascii=False)


def _sample(schema: Any) -> Any:
    """A value that satisfies a response schema (the CLI's utility calls ask for JSON)."""
    if not isinstance(schema, dict):
        return None
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {name: _sample(sub) for name, sub in props.items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return max(1, int(schema.get("minimum", 1)))
    if kind == "boolean":
        return False
    return "scripted"


@dataclass
class ScriptedModel:
    """A Gemini API server on 127.0.0.1 that plays `steps` to the agent, in order."""

    steps: list[Step] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    played: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def play(self, steps: Sequence[Step]) -> None:
        """Queue the script of the next CLI run."""
        with self._lock:
            self.steps.extend(steps)

    def agent_requests(self) -> list[Request]:
        return [r for r in self.requests if r.agent]

    def check(self) -> None:
        """Every step played, no request unexpected."""
        assert not self.errors, "\n".join(self.errors)
        assert self.played == len(self.steps), f"the model played {self.played} of {len(self.steps)} steps"

    def _next(self, request: Request) -> Step:
        with self._lock:
            self.requests.append(request)
            if not request.agent:
                return Step()
            if self.played >= len(self.steps):
                self.errors.append(
                    f"unscripted agent request #{self.played + 1}: {request.last_user_text()[:300]}"
                )
                return say("(the script has ended)")
            step = self.steps[self.played]
            self.played += 1
        wanted = (step.expect,) if isinstance(step.expect, str) else (step.expect or ())
        missing = [text for text in wanted if text not in request.last_user_text()]
        if missing:
            self.errors.append(
                f"step {self.played}: expected {missing!r} in what the CLI sent, got "
                f"{request.last_user_text()[:500]}"
            )
        return step

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _json(self, status: int, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                model.errors.append(f"unexpected GET {self.path}")
                self._json(404, {"error": {"code": 404, "message": "not scripted"}})

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size) if size else b"{}"
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                request = Request(self.path, body)
                step = model._next(request)
                if ":countTokens" in self.path:
                    self._json(200, {"totalTokens": 100})
                    return
                if request.agent:
                    self._stream(step)
                    return
                if ":generateContent" in self.path:
                    config = body.get("generationConfig") or {}
                    schema = config.get("responseJsonSchema") or config.get("responseSchema")
                    text = json.dumps(_sample(schema)) if schema else "ok"
                    self._json(200, _candidate([{"text": text}]))
                    return
                model.errors.append(f"unexpected POST {self.path}")
                self._json(404, {"error": {"code": 404, "message": "not scripted"}})

            def _stream(self, step: Step) -> None:
                parts: list[dict[str, Any]] = [
                    {"functionCall": {"name": name, "args": args}} for name, args in step.calls
                ]
                if step.text is not None:
                    parts.insert(0, {"text": step.text})
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                self.wfile.write(f"data: {json.dumps(_candidate(parts))}\r\n\r\n".encode())
                self.wfile.flush()

        return Handler


def _candidate(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
        "modelVersion": "scripted",
    }


class LeakGuard:
    """A loopback proxy that records every request sent to it (none is forwarded)."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        guard = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _refuse(self) -> None:
                guard.hits.append(f"{self.command} {self.path}")
                self.send_response(403)
                self.send_header("content-length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = do_HEAD = do_CONNECT = do_DELETE = do_PATCH = _refuse

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> LeakGuard:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass
class TurnResult:
    code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def json(self) -> dict[str, Any]:
        start = self.stdout.find("{")
        data: dict[str, Any] = json.loads(self.stdout[start:])
        return data


class GeminiCli:
    """The pinned Gemini CLI in a temporary HOME, aimed at `model`, guarded by `guard`."""

    def __init__(self, root: Path, project: Path, model: ScriptedModel, guard: LeakGuard) -> None:
        self.node, self.entry = require_gemini()
        self.project = project
        self.model = model
        self.guard = guard
        self.home = root / "home"
        self.bin = root / "bin"
        self.extra_env: dict[str, str] = {}
        gemini_dir = self.home / ".gemini"
        gemini_dir.mkdir(parents=True)
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": True}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }
        (gemini_dir / "settings.json").write_text(json.dumps(settings, indent=2))
        # Hooks and stdio MCP servers of a project run only in a trusted folder.
        (gemini_dir / "trustedFolders.json").write_text(json.dumps({str(project): "TRUST_FOLDER"}))
        # `greenloop` on the CLI's PATH is this checkout, run by this interpreter.
        self.bin.mkdir()
        wrapper = self.bin / "greenloop"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m greenloop "$@"\n')
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)

    def env(self) -> dict[str, str]:
        """A clean environment: nothing inherited but what the tools need to run."""
        path = os.pathsep.join(
            [str(self.bin), os.path.dirname(self.node), "/usr/local/bin", "/usr/bin", "/bin"]
        )
        env = {
            "PATH": path,
            "HOME": str(self.home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PYTHONPATH": str(REPO / "src"),
            "GREENLOOP_CONFIG_HOME": str(self.home / ".config" / "greenloop"),
            "GEMINI_API_KEY": "fake-key-for-a-scripted-model",
            "GOOGLE_GEMINI_BASE_URL": self.model.url,
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            env[name] = self.guard.url
        env.update(self.extra_env)
        return env

    def spawn(self, prompt: str, steps: Sequence[Step], *args: str) -> subprocess.Popen[str]:
        """Start `gemini -p PROMPT --yolo -o json` (a user turn) in its own process group, with
        the model playing `steps`."""
        self.model.play(steps)
        argv = [self.node, str(self.entry), "-p", prompt, "--yolo", "--output-format", "json", *args]
        return subprocess.Popen(
            argv,
            cwd=self.project,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # the CLI re-launches itself; a timeout must reach the whole tree
        )

    def turn(self, prompt: str, steps: Sequence[Step], *args: str, timeout: float = 240) -> TurnResult:
        """One user turn, bounded by `timeout` seconds (then the process group is killed)."""
        start = time.monotonic()
        proc = self.spawn(prompt, steps, *args)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            out, err = proc.communicate()
            pytest.fail(f"gemini did not finish within {timeout} s; stderr tail:\n{err[-3000:]}")
        return TurnResult(proc.returncode, out, err, time.monotonic() - start)


def stop(proc: subprocess.Popen[str], grace: float = 5.0) -> None:
    """SIGTERM the process group, give it `grace` seconds, then SIGKILL whatever is left of it."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def steer_requests(model: ScriptedModel) -> Iterator[Request]:
    """The agent requests that carry one of greenloop's steer messages back to the model."""
    for request in model.agent_requests():
        if "greenloop: the last test run" in request.last_user_text():
            yield request
