"""Where the closure state lives: a state URL, how it is chosen, and how it is shown.

The state URL comes from `$GREENLOOP_STATE_URL`, else the config field `state_url`, else it
is empty: the embedded SQLite database `.greenloop/state.db` of the workspace's state root.
`postgresql://user:password@host:port/dbname?options` (or `postgres://`) puts the state in
PostgreSQL, where several working copies and machines can share one gate. Anything else is
refused with the field and the fix named, before any state is touched.

A URL is never printed with its password: `redact` replaces it (and a `password=` query
parameter) with `***`. libpq also reads the password from `$PGPASSWORD` or `~/.pgpass`,
which keeps it out of config files altogether.
"""

from __future__ import annotations

import os

from greenloop.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Literal, NamedTuple

    from greenloop.config import Config
else:
    from greenloop.lite import NamedTuple

__all__ = [
    "POSTGRES_SCHEMES", "STATE_URL_ENV", "StateUrl", "check", "configured", "has_state", "parse", "redact",
]

STATE_URL_ENV = "GREENLOOP_STATE_URL"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_URL = "sqlite:"  # spelled out: the embedded default

if TYPE_CHECKING:
    BackendKind = Literal["sqlite", "postgres"]
else:
    BackendKind = str


class StateUrl(NamedTuple):
    """A parsed state URL: `kind` picks the backend; `url` is the URL as given ("" for SQLite)."""

    kind: BackendKind
    url: str = ""

    @property
    def shown(self) -> str:
        """The URL as it may be printed (password redacted); SQLite's default reads `sqlite`."""
        return redact(self.url) if self.url else "sqlite"


def check(url: str) -> str | None:
    """Why `url` is not a state URL, or None when it is one ("" and `sqlite:` mean the default)."""
    if url in ("", SQLITE_URL):
        return None
    if url.startswith(POSTGRES_SCHEMES):
        rest = url.split("://", 1)[1]
        if not rest or rest.startswith("?"):
            return "names no host or database (postgresql://user@host:5432/dbname)"
        return None
    return "must be empty (the embedded SQLite database) or a postgresql:// URL"


def parse(url: str, where: str = STATE_URL_ENV) -> StateUrl:
    """The backend a state URL names; a ConfigError naming `where` when it names none."""
    problem = check(url)
    if problem is not None:
        raise ConfigError(f"invalid state URL in {where}: {redact(url)!r} {problem}. Fix {where}.")
    if url.startswith(POSTGRES_SCHEMES):
        return StateUrl("postgres", url)
    return StateUrl("sqlite")


# Compiled on first use (`re` is not imported on the hook path).
_PASSWORD_IN_AUTHORITY = r"(?i)^(?P<head>[a-z]+://[^/?#@:]*:)(?P<password>[^/?#@]*)(?P<tail>@)"
_PASSWORD_IN_QUERY = r"(?i)(?P<head>[?&]password=)(?P<password>[^&#]*)"


def redact(url: str) -> str:
    """`url` with its password (in the authority or as a query parameter) replaced by ***."""
    import re

    shown = re.sub(_PASSWORD_IN_AUTHORITY, r"\g<head>***\g<tail>", url)
    return re.sub(_PASSWORD_IN_QUERY, r"\g<head>***", shown)


def configured(
    workspace: str | os.PathLike[str], env: Mapping[str, str] | None = None, *, config: Config | None = None
) -> StateUrl:
    """The state URL for `workspace`: `$GREENLOOP_STATE_URL`, else the config's `state_url`.

    The environment is read first so the hot path (a hook with the variable set) skips the
    config files; a caller that has loaded the config already passes it, so the files are not
    read twice; a config error surfaces here as it would anywhere else."""
    env = os.environ if env is None else env
    raw = env.get(STATE_URL_ENV)
    if raw is not None:
        return parse(raw.strip(), STATE_URL_ENV)
    if config is None:
        from greenloop.config import load

        config = load(os.fspath(workspace), env=env)
    return parse(config.state_url, "the config field state_url")


def has_state(workspace: str | os.PathLike[str], location: StateUrl | None = None) -> bool:
    """Whether the workspace's state exists yet: a shared database always does (it is
    created by whoever set it up); the SQLite file only once a first run or hook wrote it."""
    from greenloop.layout import db_path

    location = location or configured(workspace)
    return location.kind == "postgres" or os.path.isfile(db_path(workspace))
