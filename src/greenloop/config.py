"""The config model: declared once, validated at the edge, typed past it.

Layers, each later one winning:

1. built-in defaults;
2. the user config: ``$GREENLOOP_CONFIG_HOME/config.toml``, else
   ``$XDG_CONFIG_HOME/greenloop/config.toml``, else ``~/.config/greenloop/config.toml``;
3. the project config: ``[tool.greenloop]`` in ``pyproject.toml``, then ``greenloop.toml``
   (top-level keys, or a ``[greenloop]`` / ``[tool.greenloop]`` table), from the nearest
   folder that has either, walking up from the workspace to the root of its git work tree;
4. a patch layer: an explicit path, ``$GREENLOOP_CONFIG_PATCH``, or the nearest
   ``.greenloop/patch.toml`` on the same walk.

Layers 2 and 3 override key by key. The patch layer replaces the whole block (as the seeds'
``cordis.patch.yml`` does): a patch that sets only ``max_intercept_rounds`` resets every
other field to its default, so a patch must restate each field it needs. ``disabled = true``
in any layer is the same as ``enabled = false``.

Keys are snake_case; the seeds' camelCase spellings (``maxInterceptRounds``) are accepted.
Validation collects every violation (unknown keys included) into one ConfigError that names
the file, each field and why. ``tomllib`` is imported only when a config file exists and
its parse is not cached (`parse_toml`), so the hook path stays light.
"""

from __future__ import annotations

import os

from greenloop.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, NamedTuple
else:
    from greenloop.lite import NamedTuple

__all__ = [
    "FIELDS",
    "FLAKY_POLICIES",
    "HINT_LANGUAGES",
    "SANDBOX_MODES",
    "STALE_GREEN",
    "Config",
    "Layer",
    "Loaded",
    "load",
    "load_layers",
    "parse_toml",
    "project_dirs",
    "project_files",
    "read_toml",
    "user_config_path",
    "validate",
]

HINT_LANGUAGES = ("en", "zh")
FLAKY_POLICIES = ("fail", "warn")
SANDBOX_MODES = ("auto", "read-only", "workspace-write", "full-access")
STALE_GREEN = ("steer", "note")
RELEASE_NEEDS = ("owed", "affected", "full")
PATCH_ENV = "GREENLOOP_CONFIG_PATCH"


class Config(NamedTuple):
    """The effective config (an immutable typed record; NamedTuple keeps the hook path light)."""

    max_intercept_rounds: int = 2
    default_timeout_ms: int = 120_000
    summary_tail_chars: int = 3000
    enabled: bool = True
    hint_language: str = "en"  # "en" | "zh"
    # deployment default sandbox mode; auto: the strongest enforcer here, or none, said plainly
    sandbox: str = "auto"
    # DevLoop projects: also write each unit's status (testing, passed, failed) into units.json
    write_unit_status: bool = False
    # a run whose only failures are flaky (failed, then passed on rerun): "fail" keeps it red,
    # "warn" makes it green with a note (the flaky bugs are logged either way)
    flaky: str = "fail"
    # where the closure state lives: "" is the embedded SQLite database, a postgresql:// URL a
    # shared PostgreSQL database ($GREENLOOP_STATE_URL wins; greenloop.state.url)
    state_url: str = ""
    # files changed after the run that cleared the owed set: "steer" holds the turn once
    # ("run the tests again"), "note" only says so in `check`
    stale_green: str = "steer"
    # a session that changed the working tree and recorded no run is asked for one, once
    require_run: bool = True
    # where bugs.ndjson and timeline.ndjson go, relative to the workspace: "" is the default
    # (`.greenloop/`, a DevLoop project's root, or where an existing log already is;
    # layout.records_dir); "." is the workspace itself, as before `.greenloop/`
    records_dir: str = ""
    # an agent's MCP test_run that chooses no tests itself is an `--affected` run (the tests the
    # changes since the session's last green whole-suite run can break, plus the owed ones)
    affected: bool = False
    # what ending a turn needs once the session changed files, beside nothing owed and a green
    # last run: "owed" nothing more (an owed test rerun alone verifies its fix); "affected" a
    # green --affected or whole-suite run of the tree as it is now; "full" a green whole-suite run
    release: str = "owed"
    # a whole-suite pytest run records which lines each test file runs (where the workspace's
    # Python has coverage.py), and a pytest `--affected` run then skips the test files the
    # change cannot reach (runner/affected_cov.py)
    coverage_map: bool = True

    def to_json(self) -> dict[str, Any]:
        """The hint settings as JSON."""
        return dict(self._asdict())

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Config:
        """Validate a mapping (either spelling) into a Config; raises ConfigError."""
        return cls(**validate(d, "config"))


FIELDS: tuple[str, ...] = Config._fields
_ALIASES = {
    "maxInterceptRounds": "max_intercept_rounds",
    "defaultTimeoutMs": "default_timeout_ms",
    "summaryTailChars": "summary_tail_chars",
    "hintLanguage": "hint_language",
    "writeUnitStatus": "write_unit_status",
    "stateUrl": "state_url",
    "staleGreen": "stale_green",
    "requireRun": "require_run",
    "recordsDir": "records_dir",
    "coverageMap": "coverage_map",
}
# the fields whose value is one of a few words
_CHOICES = {"flaky": FLAKY_POLICIES, "stale_green": STALE_GREEN, "release": RELEASE_NEEDS}
# (minimum) for the integer fields
_INT_MIN = {"max_intercept_rounds": 0, "default_timeout_ms": 1, "summary_tail_chars": 0}
# the true-or-false fields: every field whose default is a boolean
_BOOLS = frozenset(name for name, default in Config._field_defaults.items() if isinstance(default, bool))


def _type_name(v: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(
        type(v), type(v).__name__
    )


def _suggest(key: str) -> str:
    import difflib

    names = list(FIELDS) + list(_ALIASES) + ["disabled"]
    close = difflib.get_close_matches(key, names, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def validate(raw: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Check one layer's keys and values; return them snake_cased and typed.

    Every violation is collected; one ConfigError names the source (`where`), each field and why.
    """
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        name = _ALIASES.get(key, key)
        if name == "disabled":
            if not isinstance(value, bool):
                problems.append(f"'{key}' must be true or false (got {_type_name(value)} {value!r})")
            else:
                out["enabled"] = not value
            continue
        if name not in FIELDS:
            problems.append(f"unknown key '{key}'{_suggest(key)}")
            continue
        if name in out:
            problems.append(f"'{key}' is given twice (as '{name}' and its camelCase alias); keep one")
            continue
        if name in _INT_MIN:
            low = _INT_MIN[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"'{key}' must be an integer >= {low} (got {_type_name(value)} {value!r})")
            elif isinstance(value, float) and not value.is_integer():
                problems.append(f"'{key}' must be a whole number, an integer >= {low} (got {value!r})")
            elif value < low:
                why = "positive" if low == 1 else "zero or more"
                problems.append(f"'{key}' must be {why}, an integer >= {low} (got {value!r})")
            else:
                out[name] = int(value)
        elif name in _BOOLS:
            if not isinstance(value, bool):
                problems.append(f"'{key}' must be true or false (got {_type_name(value)} {value!r})")
            else:
                out[name] = value
        elif name == "hint_language":
            if value not in HINT_LANGUAGES:
                problems.append(f"'{key}' must be one of {', '.join(HINT_LANGUAGES)} (got {value!r})")
            else:
                out[name] = value
        elif name in _CHOICES:
            if value not in _CHOICES[name]:
                problems.append(f"'{key}' must be one of {', '.join(_CHOICES[name])} (got {value!r})")
            else:
                out[name] = value
        elif name == "state_url":
            from greenloop.state.url import check, redact

            problem = check(value) if isinstance(value, str) else "must be a string"
            if problem is not None:
                shown = redact(value) if isinstance(value, str) else value
                problems.append(f"'{key}' {problem} (got {_type_name(value)} {shown!r})")
            else:
                out[name] = value
        elif name == "records_dir":
            if not isinstance(value, str):
                problems.append(f"'{key}' must be a folder path relative to the workspace, a string "
                                f"(got {_type_name(value)} {value!r})")
            elif value.startswith(("/", "~")) or "\0" in value or ".." in value.replace("\\", "/").split("/"):
                problems.append(f"'{key}' must stay inside the workspace: a relative folder such as "
                                f"'.greenloop' or '.', without '..' (got {value!r})")
            else:
                out[name] = value.strip()
        elif name == "sandbox":
            if value not in SANDBOX_MODES:
                problems.append(f"'{key}' must be one of {', '.join(SANDBOX_MODES)} (got {value!r})")
            else:
                out[name] = value
        else:  # a field without a check here would be dropped without a word
            raise AssertionError(f"config field {name!r} has no check in validate()")
    if problems:
        raise ConfigError(f"invalid config in {where}: " + "; ".join(problems) + ". Fix these fields.")
    return out


def read_toml(path: str) -> tuple[dict[str, Any], bytes]:
    """A TOML file's data and its bytes; a syntax error becomes a ConfigError naming the file and line."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
        data: dict[str, Any] = tomllib.loads(raw.decode())  # what tomllib.load(fh) does
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}; fix the syntax") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    return data, raw


CACHE_FILE = "toml-cache.json"
CACHE_ENTRIES = 64


def _cache_path() -> str:
    """`$XDG_CACHE_HOME/greenloop/toml-cache.json`, else under `~/.cache`."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(
        os.environ.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    return os.path.join(base, "greenloop", CACHE_FILE)


def parse_toml(path: str) -> dict[str, Any]:
    """Read a TOML file (read_toml without the bytes), through a parse cache.

    The cache keeps each config file's text beside its parsed data, and a file whose text is
    exactly the cached one is not parsed again (the text, not the file's times: two edits
    within one tick of the file system's clock must not be mistaken for one). It exists for
    the hooks: importing `tomllib` (which compiles its regular expressions at import) costs
    more than the rest of a hook run. Data that TOML gives as dates is not cached (JSON cannot
    hold it); a cache that cannot be read or written is skipped, never an error.
    """
    from greenloop import lite as json  # json's own C codec, without importing json

    try:
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", "surrogateescape")
    except OSError:
        return read_toml(path)[0]  # reports the error
    key = os.path.abspath(path)
    cache_path = _cache_path()
    entries: dict[str, Any] = {}
    try:
        with open(cache_path, encoding="utf-8") as fh:
            loaded = json.load(fh)
        if isinstance(loaded, dict):
            entries = loaded
    except (OSError, ValueError):
        pass
    hit = entries.get(key)
    if isinstance(hit, dict) and hit.get("text") == text and isinstance(hit.get("data"), dict):
        cached: dict[str, Any] = hit["data"]
        return cached
    data = read_toml(path)[0]
    try:
        entries.pop(key, None)
        entries[key] = {"text": text, "data": data}
        dumped = json.dumps(dict(list(entries.items())[-CACHE_ENTRIES:]))
        os.makedirs(os.path.dirname(cache_path), exist_ok=True)
        tmp = f"{cache_path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
            fh.write(dumped)
        os.replace(tmp, cache_path)
    except (OSError, TypeError, ValueError):
        pass  # a date in the data, a read-only home: parse again next time
    return data


class Layer(NamedTuple):
    """One layer that contributed: its name, file, and the (validated) values it set."""

    name: str  # "user" | "project" | "patch"
    path: str
    values: tuple[tuple[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        """The effective config as JSON (`greenloop config --json`)."""
        return {"layer": self.name, "path": self.path, "values": dict(self.values)}


class Loaded(NamedTuple):
    """The effective config plus where each value came from (for `greenloop config show`)."""

    config: Config
    sources: tuple[tuple[str, str], ...]  # (field, "default" | "user: path" | ...)
    layers: tuple[Layer, ...] = ()
    notes: tuple[str, ...] = ()

    def source_of(self, name: str) -> str:
        """Which layer set field `name`: default, user, project or patch (with the file)."""
        return dict(self.sources)[name]

    def to_json(self) -> dict[str, Any]:
        """The config with each field's source, as JSON."""
        src = dict(self.sources)
        return {
            "config": self.config.to_json(),
            "sources": {name: src[name] for name in FIELDS},
            "layers": [layer.to_json() for layer in self.layers],
            "notes": list(self.notes),
        }


def user_config_path(env: Mapping[str, str]) -> str:
    """The user-level config file: `$GREENLOOP_CONFIG_HOME/config.toml`, else `$XDG_CONFIG_HOME` (or
    `~/.config`) `/greenloop/config.toml`."""
    home = env.get("GREENLOOP_CONFIG_HOME")
    if home:
        return os.path.join(home, "config.toml")
    xdg = env.get("XDG_CONFIG_HOME")
    base = xdg if xdg else os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config")
    return os.path.join(base, "greenloop", "config.toml")


def project_dirs(workspace: str) -> list[str]:
    """Where project config is looked for, nearest first: the workspace, then its parents up to
    the root of the enclosing git work tree. Outside a git work tree, the workspace alone (a
    stray file in /tmp or $HOME must not configure every project below it)."""
    start = os.path.abspath(workspace)
    chain = [start]
    folder = start
    while not os.path.exists(os.path.join(folder, ".git")):
        parent = os.path.dirname(folder)
        if parent == folder:
            return [start]
        folder = parent
        chain.append(folder)
    return chain


def project_files(workspace: str) -> list[str]:
    """The project config files that exist in one folder, in the order they apply."""
    found = []
    for name in ("pyproject.toml", "greenloop.toml"):
        path = os.path.join(workspace, name)
        if os.path.isfile(path):
            found.append(path)
    return found


def _block(path: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """The greenloop table of a file: pyproject's [tool.greenloop]; greenloop.toml's keys."""
    tool = data.get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("greenloop"), dict):
        return dict(tool["greenloop"])
    if os.path.basename(path) == "pyproject.toml":
        return None
    if isinstance(data.get("greenloop"), dict):
        return dict(data["greenloop"])
    return {k: v for k, v in data.items() if k != "tool"}


def load_layers(
    workspace: str | os.PathLike[str] = ".",
    *,
    env: Mapping[str, str] | None = None,
    patch: str | os.PathLike[str] | None = None,
) -> Loaded:
    """Load every layer, validate each at the edge, and merge them (module docstring)."""
    env = os.environ if env is None else env
    ws = os.fspath(workspace)
    values: dict[str, Any] = Config().to_json()
    sources = dict.fromkeys(FIELDS, "default")
    layers: list[Layer] = []
    notes: list[str] = []

    found: list[tuple[str, str, dict[str, Any]]] = []
    user = user_config_path(env)
    if os.path.isfile(user):
        found.append(("user", user, _block(user, parse_toml(user)) or {}))
    dirs = project_dirs(ws)
    for folder in dirs:  # the nearest folder that configures greenloop is the project's
        blocks = [(path, _block(path, parse_toml(path))) for path in project_files(folder)]
        present = [("project", path, block) for path, block in blocks if block is not None]
        if present:
            found += present
            break
    for name, path, block in found:
        checked = validate(block, path)
        layers.append(Layer(name, path, tuple(checked.items())))
        for key, value in checked.items():
            values[key] = value
            sources[key] = f"{name}: {path}"

    patch_path = os.fspath(patch) if patch is not None else env.get(PATCH_ENV) or None
    if patch_path is None:
        for folder in dirs:
            default_patch = os.path.join(folder, ".greenloop", "patch.toml")
            if os.path.isfile(default_patch):
                patch_path = default_patch
                break
    elif not os.path.isfile(patch_path):
        raise ConfigError(f"config patch {patch_path} does not exist; fix the path or remove it")
    if patch_path is not None:
        block = _block(patch_path, parse_toml(patch_path)) or {}
        checked = validate(block, patch_path)
        layers.append(Layer("patch", patch_path, tuple(checked.items())))
        # The patch replaces the block whole: what it does not restate goes back to its default.
        values = Config().to_json()
        sources = dict.fromkeys(FIELDS, f"default (reset by patch: {patch_path})")
        for key, value in checked.items():
            values[key] = value
            sources[key] = f"patch: {patch_path}"
        notes.append(f"the patch {patch_path} replaces the whole block; fields it omits are defaults")
    if not values["enabled"]:
        notes.append("enabled = false: greenloop contributes no tools and no gate")
    return Loaded(Config(**values), tuple((k, sources[k]) for k in FIELDS), tuple(layers), tuple(notes))


def load(
    workspace: str | os.PathLike[str] = ".",
    *,
    env: Mapping[str, str] | None = None,
    patch: str | os.PathLike[str] | None = None,
) -> Config:
    """The effective config for a workspace; raises ConfigError naming every bad field."""
    return load_layers(workspace, env=env, patch=patch).config
