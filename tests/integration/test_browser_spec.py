"""Frontend units and browser steps before anything starts (validation), and the static server.

No browser here: validation errors name case, step and field, exit 2, start nothing and write
no run folder; the static server is exercised over real loopback HTTP.
"""

from __future__ import annotations

import http.client
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from greenloop.cli import main
from greenloop.errors import ConfigError, SpecError
from greenloop.integration.chromium import CHROMIUM_ENV, require_browser
from greenloop.integration.ports import PortPicker
from greenloop.integration.run import integrate
from greenloop.integration.spec.loading import load_spec
from greenloop.integration.spec.records import Action, PageExpect
from greenloop.integration.static import CONFIG_PATH, StaticServer, inject_config, serve_unit

from .itkit import write_project


def tripwire(uid: str, folder: Path) -> dict[str, Any]:
    """A backend whose start leaves a file behind: its absence proves nothing was started."""
    code = f"open({str(folder / ('started-' + uid))!r}, 'w').close()"
    return {"id": uid, "kind": "be", "start": [sys.executable, "-c", code]}


def fe_unit(**extra: Any) -> dict[str, Any]:
    return {"id": "web", "kind": "fe", "static": "static", "depends_on": ["api"], **extra}


def browser_case(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"id": "ui", "steps": list(steps)}


def ui(**kw: Any) -> dict[str, Any]:
    return {"unit": "web", "page": "/", **kw}


def project(tmp_path: Path, cases: list[dict[str, Any]], fe: dict[str, Any] | None = None) -> Path:
    root = write_project(tmp_path / "p", [tripwire("api", tmp_path), fe or fe_unit()], cases)
    (root / "units" / "web" / "static").mkdir(parents=True, exist_ok=True)
    (root / "units" / "web" / "static" / "index.html").write_text("<html><head></head><body></body></html>")
    return root


def assert_rejected(tmp_path: Path, root: Path, *fragments: str) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(root)
    message = info.value.message
    for fragment in fragments:
        assert fragment in message, message
    assert main(["integrate", str(root), "--json"]) == 2
    assert not list(tmp_path.glob("started-*"))
    assert not (root / "integration" / "runs").exists()
    return message


def test_browser_steps_load_into_typed_records(tmp_path: Path) -> None:
    http_step = {"unit": "api", "call": "POST /api/todos", "body": {"title": "x"}}
    step = ui(
        actions=[
            {"fill": ["input[name=title]", "{{step0.title}}"]},
            {"press": ["input[name=title]", "Enter"]},
            {"click": "button#add"},
            {"wait_for": "li"},
            {"wait_for": {"text": "buy milk"}},
            {"wait_for": {"selector": "li", "text": "{{step0.title}}"}},
            {"goto": "/about"},
        ],
        expect=[{"selector": "li", "text": "buy milk"}, {"selector": "li", "count": 2}, {"selector": "h1"}],
        wait_ms=1500,
    )
    spec = load_spec(project(tmp_path, [browser_case(http_step, step)]))
    web = spec.unit("web")
    assert web.static == str((tmp_path / "p" / "units" / "web" / "static").resolve())
    assert web.start == () and web.health == "/"
    assert spec.has_browser_steps
    s = spec.cases[0].steps[1]
    assert (s.kind, s.unit, s.page, s.wait_ms) == ("browser", "web", "/", 1500)
    assert s.actions == (
        Action("fill", "input[name=title]", "{{step0.title}}"),
        Action("press", "input[name=title]", "Enter"),
        Action("click", "button#add"),
        Action("wait_for", "li"),
        Action("wait_for", text="buy milk"),
        Action("wait_for", "li", text="{{step0.title}}"),
        Action("goto", value="/about"),
    )
    assert s.checks == (PageExpect("li", "buy milk"), PageExpect("li", count=2), PageExpect("h1"))
    assert [u.id for u in spec.needed_units()] == ["api", "web"]


@pytest.mark.parametrize(
    ("step", "fragments"),
    [
        (ui(actions=[{"hover": "li"}]), ['"actions[0]"', 'unknown action "hover"', "goto, fill, click"]),
        (ui(expect={"text": "buy milk"}), ['"expect.selector" is required']),
        (ui(expect=[{"selector": "li"}, {"count": 1}]), ['"expect[1].selector" is required']),
        (ui(actions=[{"fill": "input"}]), ['"actions[0].fill" must be [selector, text]']),
        (ui(actions=[{"click": ""}]), ['"actions[0].click" must be a selector']),
        (ui(actions=[{"click": "a", "fill": ["b", "c"]}]), ['"actions[0]" must be an object with one']),
        (ui(actions=[{"wait_for": {"txt": "x"}}]), ['"actions[0].wait_for" must be a selector']),
        (ui(actions=[{"goto": "about"}]), ['"actions[0].goto": path "about" must start with "/"']),
        (ui(expect={"selector": "li", "count": -1}), ['"expect.count" must be a whole number']),
        (ui(expect={"selector": "li", "colour": "red"}), ['unknown field "expect.colour"']),
        (ui(wait_ms=0), ['"wait_ms" must be a whole number of milliseconds']),
        (ui(page="index.html"), ['"page": path "index.html" must start with "/"']),
        (ui(expect={"selector": "li", "text": "{{step3.title}}"}), ['"expect.text": placeholder {{step3']),
        (ui(call="GET /"), ['either an HTTP step ("call") or a browser step']),
        (ui(headers={"a": "b"}), ['unknown field "headers" in a browser step']),
        ({"unit": "api", "page": "/"}, ['unit "api" is a be unit; browser steps']),
        ({"unit": "web", "call": "GET /"}, ['unit "web" is a fe unit; HTTP steps']),
        ({"unit": "web", "actions": [{"click": "a"}]}, ['"page": the first browser step of a']),
        ({"unit": "web", "page": None}, ['field "page" must be a path']),
    ],
)
def test_a_bad_browser_step_names_case_step_and_field(
    tmp_path: Path, step: dict[str, Any], fragments: list[str]
) -> None:
    assert_rejected(tmp_path, project(tmp_path, [browser_case(step)]), 'case "ui", step 0', *fragments)


@pytest.mark.parametrize(
    ("fe", "fragment"),
    [
        ({"id": "web", "kind": "fe"}, 'a frontend unit needs "static"'),
        (fe_unit(static="public"), 'field "static": folder "public" does not exist'),
        (fe_unit(start=["node", "server.js"]), 'fields "static" and "start" exclude each other'),
        (fe_unit(static="/etc"), 'field "static" must be a folder relative to the unit'),
    ],
)
def test_a_bad_frontend_unit_is_named(tmp_path: Path, fe: dict[str, Any], fragment: str) -> None:
    root = project(tmp_path, [browser_case(ui(expect={"selector": "h1"}))], fe=fe)
    assert_rejected(tmp_path, root, 'units.json unit "web"', fragment)


def test_static_is_only_for_frontend_units(tmp_path: Path) -> None:
    api = tripwire("api", tmp_path) | {"static": "static"}
    root = write_project(tmp_path / "p", [api], [{"id": "c", "steps": [{"unit": "api", "call": "GET /"}]}])
    assert_rejected(tmp_path, root, 'units.json unit "api"', '"static" is for frontend units')


def test_a_missing_chromium_is_a_clear_error_before_anything_starts(tmp_path: Path) -> None:
    root = project(tmp_path, [browser_case(ui(expect={"selector": "h1"}))])
    env = {"PATH": "/usr/bin:/bin", CHROMIUM_ENV: str(tmp_path / "no-chromium")}
    with pytest.raises(ConfigError, match=CHROMIUM_ENV) as info:
        integrate(root, env=env, sandbox="full-access", record_bugs=False)
    assert info.value.exit_code == 2
    assert not list(tmp_path.glob("started-*"))
    assert not (root / "integration" / "runs").exists()
    assert require_browser({"PATH": ""}).endswith("chromium")  # this machine has Debian's chromium


# ---- the static server ----------------------------------------------------------------------


def test_the_config_script_comes_first_in_every_kind_of_page() -> None:
    cfg = {"api_base": "http://127.0.0.1:1", "backends": {"api": "http://127.0.0.1:1"}}
    for page in (
        b"<!doctype html><html><head><title>t</title></head><body></body></html>",
        b"<html lang=en><body></body></html>",
        b"<!DOCTYPE html><p>bare</p>",
        b"<p>fragment</p>",
    ):
        out = inject_config(page, cfg)
        script = out.index(b"<script>window.__GREENLOOP__ = ")
        assert out.replace(out[script : out.index(b"</script>") + 9], b"") == page
        assert all(out.find(tag) == -1 or out.find(tag) > script for tag in (b"<title>", b"<body>", b"<p>"))
    evil = inject_config(b"<head></head>", {"api_base": "</script><script>alert(1)</script>"})
    assert evil.count(b"</script>") == 1


def get(port: int, path: str) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type") or "", r.read()
    finally:
        conn.close()


def test_the_static_server_serves_the_folder_its_config_and_nothing_else(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "sub").mkdir(parents=True)
    (site / "index.html").write_text("<html><head></head><body>home</body></html>")
    (site / "sub" / "index.html").write_text("<p>sub</p>")
    (site / "app.js").write_text("console.log(1)")
    (tmp_path / "secret.txt").write_text("not served")
    (site / "link.txt").symlink_to(tmp_path / "secret.txt")
    lines: list[str] = []
    cfg = {"api_base": "http://127.0.0.1:9", "backends": {"api": "http://127.0.0.1:9"}}
    with StaticServer(site, cfg, log=lines.append) as srv:
        status, ctype, body = get(srv.port, "/")
        assert status == 200 and ctype.startswith("text/html")
        assert b'window.__API_BASE__ = window.__GREENLOOP__.api_base' in body and b"home" in body
        assert get(srv.port, "/sub/")[2].startswith(b"<script>")
        status, ctype, body = get(srv.port, "/app.js")
        assert (status, body) == (200, b"console.log(1)") and "javascript" in ctype
        status, ctype, body = get(srv.port, CONFIG_PATH)
        assert status == 200 and json.loads(body) == cfg
        for escape in ("/../secret.txt", "/%2e%2e/secret.txt", "/link.txt", "/sub/../../secret.txt"):
            assert get(srv.port, escape)[0] == 404, escape
        assert get(srv.port, "/missing.css")[0] == 404
    assert any('"GET / HTTP/1.1" 200' in line for line in lines)


def test_serve_unit_points_the_page_at_its_first_dependency(tmp_path: Path) -> None:
    root = project(tmp_path, [browser_case(ui(expect={"selector": "h1"}))], fe=fe_unit(depends_on=["api"]))
    unit = load_spec(root).unit("web")
    logged: list[tuple[str, str]] = []
    srv = serve_unit(
        unit, {"api": "http://127.0.0.1:7001", "other": "http://127.0.0.1:7002"}, PortPicker(),
        write=lambda label, text: logged.append((label, text)),
    )
    try:
        assert json.loads(get(srv.port, CONFIG_PATH)[2]) == {
            "api_base": "http://127.0.0.1:7001",
            "backends": {"api": "http://127.0.0.1:7001"},
        }
    finally:
        srv.stop()
    assert logged and logged[0][0] == f"[web:{srv.port}] out|"
