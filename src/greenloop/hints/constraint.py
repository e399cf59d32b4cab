"""The parts of a database constraint failure's hint: which constraint, on which column, with
which value, and what to do about it (the db_* placeholders of the db-constraint row)."""

from __future__ import annotations

import re

from greenloop.hints.frames import Evidence

__all__ = ["constraint_parts"]

_DB_FAILED = re.compile(
    r"(UNIQUE|NOT NULL|FOREIGN KEY|CHECK|PRIMARY KEY) constraint failed(?::\s*([\w.]+(?:,\s*[\w.]+)*))?"
)
_DB_CODE = re.compile(r"SQLITE_CONSTRAINT_(UNIQUE|NOTNULL|FOREIGNKEY|CHECK|PRIMARYKEY)")
_DB_PG_KEY = re.compile(r"Key \(([^)]{1,80})\)=\(([^)]{0,80})\) already exists")
_DB_DUP = re.compile(r"Duplicate entry '([^']{0,80})' for key '([^']{1,80})'")
_DB_FIX = {
    "UNIQUE": (
        "that value is already stored, so look the row up first and answer 409"
        " (or give the test a fresh value)",
        "该值已存在:先查询该行并返回 409(或让测试使用新值)",
    ),
    "NOT NULL": (
        "the insert passes NULL (None/undefined) for that column: fill it in or give the column a default",
        "插入时该列为 NULL(None/undefined):补上该值或给列设默认值",
    ),
    "FOREIGN KEY": (
        "the row it refers to does not exist: create it first or check the id passed",
        "它引用的行不存在:先创建该行或核对传入的 id",
    ),
}
_DB_FIX_OTHER = (
    "the value breaks the column's rule: validate it before writing and answer 400",
    "该值违反列的约束:写入前先校验并返回 400",
)


def constraint_parts(text: str, ev: Evidence, error: str, zh: bool) -> dict[str, str]:
    """db_what, db_value and db_fix of a constraint failure whose fields read `text`."""
    kind, cols, value = "", "", ""
    m = _DB_FAILED.search(text)
    if m:
        kind, cols = m.group(1), m.group(2) or ""
    c = _DB_CODE.search(text)
    if c and not kind:
        kind = {"NOTNULL": "NOT NULL", "FOREIGNKEY": "FOREIGN KEY", "PRIMARYKEY": "PRIMARY KEY"}.get(
            c.group(1), c.group(1)
        )
    pg = _DB_PG_KEY.search(text)
    if pg:
        kind, cols, value = "UNIQUE", cols or pg.group(1), pg.group(2)
    dup = _DB_DUP.search(text)
    if dup:
        kind, cols, value = "UNIQUE", cols or dup.group(2), dup.group(1)
    if not kind and re.search(r"duplicate key|unique", text, re.I):
        kind = "UNIQUE"
    key = "UNIQUE" if kind == "PRIMARY KEY" else kind
    fix = _DB_FIX.get(key, _DB_FIX_OTHER)[1 if zh else 0]
    table_col = re.fullmatch(r"(\w+)\.(\w+)", cols)
    if table_col:  # SQLite's `users.email`: say which table and which column
        on = f" on {cols} (table {table_col.group(1)}, column {table_col.group(2)})"
        on_zh = f" {cols}({table_col.group(1)} 表的 {table_col.group(2)} 列)上"
    else:
        on = f" on {cols}" if cols else ""
        on_zh = f" {cols} 上" if cols else ""
    kind_txt = kind or "a"
    named = f" ({error})" if error and "constraint failed" not in error else ""
    if zh:
        what = f"的写入违反了{on_zh}的 {kind or ''} 约束{named}".replace("  ", " ")
    else:
        what = f"The write breaks the {kind_txt} constraint{named}{on}"
    if value:
        shown = f"'{value}'"
        where_value = f"(冲突的值是 {shown})" if zh else f": the value {shown} collides"
    elif ev.call is not None and ev.test_where:
        where_value = (
            f"(由测试 {ev.test_where} 的调用 `{ev.call.text}` 写入)"
            if zh
            else f" (written by the test's call at {ev.test_where}: `{ev.call.text}`)"
        )
    else:
        where_value = ""
    return {"db_what": what, "db_value": where_value, "db_fix": fix}
