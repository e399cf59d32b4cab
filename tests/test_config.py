"""Config: layers (defaults, user, project, patch), aliases, validation, provenance, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from greenloop.config import Config, load, load_layers, user_config_path, validate
from greenloop.errors import ConfigError


def _env(tmp_path: Path) -> dict[str, str]:
    """An environment whose user config folder is private to the test."""
    home = tmp_path / "confhome"
    home.mkdir(exist_ok=True)
    return {"GREENLOOP_CONFIG_HOME": str(home), "HOME": str(tmp_path / "home")}


def test_defaults_without_any_file(tmp_path: Path) -> None:
    loaded = load_layers(tmp_path, env=_env(tmp_path))
    assert loaded.config == Config()
    assert loaded.config.max_intercept_rounds == 2
    assert loaded.config.default_timeout_ms == 120_000
    assert loaded.config.summary_tail_chars == 3000
    assert loaded.config.enabled is True
    assert all(src == "default" for _, src in loaded.sources)


def test_user_config_locations() -> None:
    assert user_config_path({"GREENLOOP_CONFIG_HOME": "/c"}) == "/c/config.toml"
    assert user_config_path({"XDG_CONFIG_HOME": "/x", "HOME": "/h"}) == "/x/greenloop/config.toml"
    assert user_config_path({"HOME": "/h"}) == "/h/.config/greenloop/config.toml"


def test_user_then_project_override_key_by_key(tmp_path: Path) -> None:
    env = _env(tmp_path)
    Path(env["GREENLOOP_CONFIG_HOME"], "config.toml").write_text(
        "max_intercept_rounds = 5\nhint_language = 'zh'\n"
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pyproject.toml").write_text("[project]\nname='x'\n\n[tool.greenloop]\nmaxInterceptRounds = 1\n")
    loaded = load_layers(ws, env=env)
    assert loaded.config.max_intercept_rounds == 1  # project wins
    assert loaded.config.hint_language == "zh"  # user value kept: layers merge key by key
    assert loaded.source_of("max_intercept_rounds") == f"project: {ws / 'pyproject.toml'}"
    assert loaded.source_of("hint_language").startswith("user: ")
    assert loaded.source_of("summary_tail_chars") == "default"


def test_greenloop_toml_wins_over_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.greenloop]\nsummary_tail_chars = 10\ndefault_timeout_ms = 5\n"
    )
    (tmp_path / "greenloop.toml").write_text("summaryTailChars = 20\n")
    cfg = load(tmp_path, env=_env(tmp_path))
    assert cfg.summary_tail_chars == 20
    assert cfg.default_timeout_ms == 5


def test_pyproject_without_table_contributes_nothing(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n[tool.ruff]\nline-length = 1\n")
    loaded = load_layers(tmp_path, env=_env(tmp_path))
    assert loaded.config == Config()
    assert loaded.layers == ()


def test_patch_replaces_the_block_whole(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text("max_intercept_rounds = 7\nsummary_tail_chars = 99\n")
    (tmp_path / ".greenloop").mkdir()
    (tmp_path / ".greenloop" / "patch.toml").write_text("maxInterceptRounds = 1\nsummaryTailChars = 4000\n")
    loaded = load_layers(tmp_path, env=_env(tmp_path))
    assert loaded.config.max_intercept_rounds == 1
    assert loaded.config.summary_tail_chars == 4000
    assert loaded.source_of("summary_tail_chars").startswith("patch: ")


def test_patch_resets_fields_it_does_not_restate(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text("max_intercept_rounds = 7\nhint_language = 'zh'\n")
    patch = tmp_path / "my-patch.toml"
    patch.write_text("summary_tail_chars = 10\n")
    loaded = load_layers(tmp_path, env=_env(tmp_path), patch=patch)
    assert loaded.config.summary_tail_chars == 10
    assert loaded.config.max_intercept_rounds == 2  # back to the default: the patch replaced the block
    assert loaded.config.hint_language == "en"
    assert "reset by patch" in loaded.source_of("max_intercept_rounds")
    assert any("replaces the whole block" in n for n in loaded.notes)


def test_patch_from_environment_and_missing_patch(tmp_path: Path) -> None:
    patch = tmp_path / "p.toml"
    patch.write_text("disabled = true\n")
    env = {**_env(tmp_path), "GREENLOOP_CONFIG_PATCH": str(patch)}
    assert load(tmp_path, env=env).enabled is False
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path, env=_env(tmp_path), patch=tmp_path / "nope.toml")


def test_disabled_spellings(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text("enabled = false\n")
    loaded = load_layers(tmp_path, env=_env(tmp_path))
    assert loaded.config.enabled is False
    assert any("no tools and no gate" in n for n in loaded.notes)


def test_validation_names_every_violating_field_and_why() -> None:
    with pytest.raises(ConfigError) as info:
        validate(
            {
                "maxInterceptRounds": 1.5,
                "default_timeout_ms": 0,
                "summary_tail_chars": -3,
                "enabled": "yes",
                "hint_language": "fr",
                "sandbox": "open",
                "max_rounds": 3,
            },
            "greenloop.toml",
        )
    msg = str(info.value)
    assert info.value.exit_code == 2
    assert "greenloop.toml" in msg
    assert "'maxInterceptRounds' must be a whole number" in msg  # integrality
    assert "'default_timeout_ms' must be positive, an integer >= 1 (got 0)" in msg  # positivity
    assert "'summary_tail_chars' must be zero or more" in msg
    assert "'enabled' must be true or false" in msg
    assert "'hint_language' must be one of en, zh" in msg
    assert "'sandbox' must be one of auto, read-only, workspace-write, full-access" in msg
    assert "unknown key 'max_rounds'" in msg
    assert "did you mean" in msg


def test_booleans_and_strings_are_not_integers() -> None:
    with pytest.raises(
        ConfigError, match="'max_intercept_rounds' must be an integer >= 0 \\(got a boolean True\\)"
    ):
        validate({"max_intercept_rounds": True}, "x")
    with pytest.raises(ConfigError, match="got a string '3'"):
        validate({"default_timeout_ms": "3"}, "x")
    assert validate({"default_timeout_ms": 2000.0}, "x") == {"default_timeout_ms": 2000}


def test_both_spellings_at_once_is_an_error() -> None:
    with pytest.raises(ConfigError, match="given twice"):
        validate({"max_intercept_rounds": 1, "maxInterceptRounds": 2}, "x")


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text("max_intercept_rounds = = 2\n")
    with pytest.raises(ConfigError, match=r"greenloop\.toml is not valid TOML"):
        load(tmp_path, env=_env(tmp_path))


def test_bad_user_config_is_reported_with_its_path(tmp_path: Path) -> None:
    env = _env(tmp_path)
    Path(env["GREENLOOP_CONFIG_HOME"], "config.toml").write_text("summary_tail_chars = -1\n")
    with pytest.raises(ConfigError, match=r"config\.toml: 'summary_tail_chars'"):
        load(tmp_path, env=env)


def test_to_json_round_trip() -> None:
    cfg = Config(max_intercept_rounds=0, hint_language="zh")
    assert Config.from_json(cfg.to_json()) == cfg


# a value other than the default for every field: a field that validate() does not check must not
# be dropped without a word (coverage_map = false once was)
_OTHER = {"max_intercept_rounds": 5, "default_timeout_ms": 999, "summary_tail_chars": 10, "enabled": False,
          "hint_language": "zh", "sandbox": "full-access", "write_unit_status": True, "flaky": "warn",
          "state_url": "postgresql://127.0.0.1/x", "stale_green": "note", "require_run": False,
          "records_dir": ".", "affected": True, "release": "full", "coverage_map": False}


def test_every_field_set_in_a_file_is_kept(tmp_path: Path) -> None:
    assert set(_OTHER) == set(Config._fields), "give the new field a non-default value here"
    lines = [f"{key} = {json.dumps(value)}" for key, value in _OTHER.items()]
    (tmp_path / "greenloop.toml").write_text("\n".join(lines) + "\n")
    loaded = load(tmp_path, env=_env(tmp_path))
    for key, value in _OTHER.items():
        assert getattr(loaded, key) == value, key
        assert getattr(Config(), key) != value, key


def _cli(args: list[str], cwd: Path, env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **env_extra}
    return subprocess.run(
        [sys.executable, "-m", "greenloop", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_config_show_prints_values_and_sources(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text("maxInterceptRounds = 3\n")
    proc = _cli(["config", "show", "--json"], tmp_path, _env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["config"]["max_intercept_rounds"] == 3
    assert data["sources"]["max_intercept_rounds"].startswith("project: ")
    assert data["sources"]["default_timeout_ms"] == "default"
    text = _cli(["config", "show"], tmp_path, _env(tmp_path))
    assert "max_intercept_rounds = 3" in text.stdout and "# project:" in text.stdout


def test_config_show_bad_config_exits_2_naming_fields(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text("max_intercept_rounds = -1\nbogus = 1\n")
    proc = _cli(["config", "show"], tmp_path, _env(tmp_path))
    assert proc.returncode == 2
    assert "max_intercept_rounds" in proc.stderr and "bogus" in proc.stderr
    assert proc.stdout == ""


def test_project_config_is_found_up_to_the_git_root(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    sub = root / "packages" / "app"
    sub.mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "pyproject.toml").write_text("[tool.greenloop]\nmax_intercept_rounds = 4\n")
    (root / "packages" / "pyproject.toml").write_text("[project]\nname = 'no greenloop table here'\n")
    (root / ".greenloop").mkdir()
    assert load(sub, env=_env(tmp_path)).max_intercept_rounds == 4
    (root / ".greenloop" / "patch.toml").write_text("summary_tail_chars = 1\n")
    loaded = load_layers(sub, env=_env(tmp_path))
    assert loaded.config.summary_tail_chars == 1 and loaded.config.max_intercept_rounds == 2
    (sub / "greenloop.toml").write_text(
        "default_timeout_ms = 9\n"
    )  # nearer wins, and the patch still applies
    (root / ".greenloop" / "patch.toml").unlink()
    cfg = load(sub, env=_env(tmp_path))
    assert cfg.default_timeout_ms == 9 and cfg.max_intercept_rounds == 2


def test_outside_a_git_tree_parents_are_not_consulted(tmp_path: Path) -> None:
    (tmp_path / "greenloop.toml").write_text("max_intercept_rounds = 9\n")
    sub = tmp_path / "child"
    sub.mkdir()
    assert load(sub, env=_env(tmp_path)).max_intercept_rounds == 2


@pytest.mark.parametrize("value", ["../up", "/abs", "a/../../b", 3])
def test_records_dir_must_be_a_folder_inside_the_workspace(value: object) -> None:
    with pytest.raises(ConfigError, match="records_dir"):
        validate({"records_dir": value}, "greenloop.toml")
    assert validate({"recordsDir": ".greenloop/records"}, "x") == {"records_dir": ".greenloop/records"}
