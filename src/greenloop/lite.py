"""Light stand-ins for `typing.NamedTuple` and `json` on the hook path (start-up cost).

The hooks run as a fresh process on every agent turn, so what they import is most of what
they cost. `typing` (with the `re`, `enum`, `contextlib` and `functools` it imports) took
~12 ms of a Stop hook here and `json` imports `re` too. The modules a hook imports therefore
name their types under `TYPE_CHECKING` (set to False by hand: importing it from `typing` is
the cost) and take these instead:

- `NamedTuple`: the same class syntax and the same class `typing.NamedTuple` makes
  (`collections.namedtuple` with the annotated fields, their defaults and the class body's
  methods), without typing's ForwardRef for each string annotation. Type checkers see
  `typing.NamedTuple` (`if TYPE_CHECKING: from typing import NamedTuple`).
- `loads`, `load`, `dumps`: `json.loads` / `json.dumps` (no indent) through the same C
  scanner and encoder `json` uses (`_json`), so the results and the text are the same; a
  malformed document raises `json.JSONDecodeError` (imported then).

tests/test_import_budget.py holds what the Stop hook may import.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

__all__ = ["NamedTuple", "dumps", "load", "loads"]

_SPECIAL = frozenset({"__module__", "__qualname__", "__name__", "__annotations__", "__doc__"})


class _NamedTupleMeta(type):
    def __new__(mcs, typename: str, bases: tuple[type, ...], ns: dict[str, Any]) -> Any:
        if ns.get("_lite_root"):
            return super().__new__(mcs, typename, bases, ns)
        import collections

        namedtuple: Any = collections.namedtuple  # the fields are this class's, not literals

        fields = list(ns.get("__annotations__", {}))
        defaults = [ns[n] for n in fields if n in ns]
        seen_default = False
        for name in fields:
            if name in ns:
                seen_default = True
            elif seen_default:
                raise TypeError(f"Non-default namedtuple field {name} cannot follow default fields")
        cls = namedtuple(typename, fields, defaults=defaults, module=ns["__module__"])
        cls.__annotations__ = dict(ns.get("__annotations__", {}))
        if "__doc__" in ns and ns["__doc__"] is not None:
            cls.__doc__ = ns["__doc__"]
        cls.__qualname__ = ns.get("__qualname__", typename)
        for key, value in ns.items():
            if key not in _SPECIAL and key not in fields:
                setattr(cls, key, value)
        return cls


NamedTuple: Any = _NamedTupleMeta("NamedTuple", (), {"_lite_root": True, "__module__": __name__})


class _Context:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_context: Any = _Context()  # what the scanner reads of json.JSONDecoder
_scan = _json.make_scanner(_context)
_WS = " \t\n\r"


def _error(msg: str, doc: str, pos: int) -> Exception:
    from json import JSONDecodeError

    return JSONDecodeError(msg, doc, pos)


def loads(s: str) -> Any:
    """`json.loads(s)` for a str."""
    if s.startswith("\ufeff"):
        raise _error("Unexpected UTF-8 BOM (decode using utf-8-sig)", s, 0)
    start = len(s) - len(s.lstrip(_WS))
    try:
        obj, end = _scan(s, start)
    except StopIteration as err:
        raise _error("Expecting value", s, err.value) from None
    rest = len(s) - len(s[end:].lstrip(_WS))
    if rest != len(s):
        raise _error("Extra data", s, rest)
    return obj


def load(fh: IO[str]) -> Any:
    """`json.load(fh)`."""
    return loads(fh.read())


def _default(obj: Any) -> Any:
    raise TypeError(f"Object of type {obj.__class__.__name__} is not JSON serializable")


def dumps(obj: Any, *, ensure_ascii: bool = True, sort_keys: bool = False) -> str:
    """`json.dumps(obj, ensure_ascii=…, sort_keys=…)` (no indent: the default separators)."""
    encode = _json.encode_basestring_ascii if ensure_ascii else _json.encode_basestring
    encoder = _json.make_encoder({}, _default, encode, None, ": ", ", ", sort_keys, False, True)
    return "".join(encoder(obj, 0))
