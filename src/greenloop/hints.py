"""Failure -> hint: one or two sentences naming the likely cause and where to look.

The knowledge lives in RULES, a plain table. Each rule lists the fields of the failure it reads
(message, stack, expected, got), the regular expressions that must all match there, an optional
HTTP status condition on (expected, got), and a message template in English and Chinese. The
first rule that matches wins; the last one always matches and still names the test, what it
expected and the top frame in the user's code.

Templates may use: {test} (the test's name), {where} (the top frame in the user's code, as
file:line), {test_where} (the test's own file:line), {expected}, {got} (shortened), {stub} (how
to stub a dependency in this framework), {diff} (the first differing key of a deep comparison,
if one can be read), and the named groups of the rule's patterns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from greenloop.errors import UsageError
from greenloop.model import Failure

__all__ = [
    "LANGUAGES",
    "RULES",
    "Rule",
    "apply",
    "hint_for",
    "match",
    "top_user_frame",
]

Field = Literal["message", "stack", "expected", "got", "kind"]
LANGUAGES: tuple[str, ...] = ("en", "zh")
_MAX_VALUE = 60  # characters of an expected/got value quoted inside a hint


@dataclass(frozen=True)
class Rule:
    """One row of the hint table (plain data)."""

    id: str
    fields: tuple[Field, ...]
    patterns: tuple[str, ...]  # all must match the joined fields (re.IGNORECASE | re.DOTALL)
    en: str
    zh: str
    # (expected, got) HTTP status condition: an exact code ("401"), a class ("4xx") or "*".
    status: tuple[str, str] | None = None


_MS: tuple[Field, ...] = ("message", "stack")
_M: tuple[Field, ...] = ("message",)
_ALL: tuple[Field, ...] = ("message", "stack", "expected", "got")

RULES: tuple[Rule, ...] = (
    # --- the suite could not load the code under test
    Rule(
        "js-module-not-found",
        _M,
        (r"Cannot find module '(?P<module>[^']+)'|Failed to load url (?P<url>\S+)|ERR_MODULE_NOT_FOUND",),
        "The import of '{module}{url}' at {where} fails, so none of the tests in {test} ran; check"
        " that the path and file name under code/ match the import and that the module exports it.",
        "{where} 处导入 '{module}{url}' 失败,{test} 里的测试一个都没跑;核对导入路径、文件名"
        "与 code/ 下实际文件一致,并确认该模块已导出。",
    ),
    Rule(
        "py-module-not-found",
        _M,
        (r"ModuleNotFoundError: No module named '(?P<module>[^']+)'",),
        "Python cannot find the module '{module}' imported by {test} ({where}); check the module's"
        " file name and that its folder is on sys.path (conftest.py or the package layout).",
        "Python 找不到 {test} 导入的模块 '{module}'({where});核对模块文件名,并确认其目录在"
        " sys.path 上(conftest.py 或包结构)。",
    ),
    Rule(
        "py-import-name",
        _M,
        (r"ImportError: cannot import name '(?P<name>[^']+)' from '(?P<module>[^']+)'",),
        "The module '{module}' has no '{name}' that {test} imports ({where}); the function was"
        " renamed, not written yet, or is defined under another name in the code.",
        "模块 '{module}' 里没有 {test} 要导入的 '{name}'({where});该函数可能被改名、还没写,"
        "或在代码里用了别的名字。",
    ),
    Rule(
        "syntax-error",
        _M,
        (r"SyntaxError:? (?P<detail>[^\n]{0,80})",),
        "The code does not parse ({detail}) at {where}, so the suite could not load; fix the"
        " syntax there before reading any test result.",
        "代码在 {where} 无法解析({detail}),整个测试套件没能加载;先修好那里的语法再看测试结果。",
    ),
    Rule(
        "fixture-not-found",
        _M,
        (r"fixture '(?P<name>[^']+)' not found",),
        "{test} asks for a pytest fixture '{name}' that no conftest.py or plugin defines; define"
        " it in tests/conftest.py or fix the argument name at {test_where}.",
        "{test} 请求的 pytest fixture '{name}' 没有任何 conftest.py 或插件定义;在"
        " tests/conftest.py 里定义它,或改正 {test_where} 处的参数名。",
    ),
    # --- the seed's patterns (auth, database, timeouts)
    Rule(
        "bcrypt-null-user",
        _MS,
        (
            r"Illegal arguments: \w+, (?:undefined|null)|data and hash arguments required"
            r"|(?:null|undefined|NoneType)[^\n]*(?:hash|password)|(?:bcrypt|compare)[^\n]*(?:null|undefined)",
        ),
        "The password is compared against a user that was not found (null): at {where} look the"
        " user up first and answer 401 when it is missing, before calling bcrypt.compare.",
        "用户不存在时不要 bcrypt.compare(null, …):在 {where} 先查用户,查不到直接返回 401,再做密码比对。",
    ),
    Rule(
        "db-constraint",
        _MS,
        (
            r"(?P<constraint>SQLITE_CONSTRAINT\w*|IntegrityError|(?:UNIQUE|FOREIGN KEY|NOT NULL|CHECK)"
            r" constraint failed[^\n]*|duplicate key value violates unique constraint|ER_DUP_ENTRY)",
        ),
        "A database constraint rejected the write ({constraint}) at {where}; the code should check"
        " for an existing row (or the missing reference) first and answer 409/400 instead of crashing.",
        "数据库约束冲突({constraint}),位置 {where};业务层应先查再写(已存在的行或缺失的外键),"
        "返回 409/400 而不是直接崩溃。",
    ),
    Rule(
        "network",
        _MS,
        (
            r"ECONNREFUSED|Connection ?refused|fetch failed|ENOTFOUND|EAI_AGAIN|getaddrinfo"
            r"|Max retries exceeded|ConnectError|ConnectTimeout|connect ETIMEDOUT",
        ),
        "The test reaches a real network address at {where} and nothing answers; start the server"
        " inside the test on a loopback port, or stub the external call with {stub}.",
        "测试在 {where} 访问了真实网络地址但无人应答;在测试里用回环端口起服务,或用 {stub} stub 掉外部调用。",
    ),
    Rule(
        "timeout",
        _M,
        (
            r"timed? ?out|Exceeded timeout|STACK_TRACE_ERROR|Timeout \(>[\d.]+s\)"
            r"|Test timeout of|async callback was not invoked",
        ),
        "{test} never finished ({where}): look for a missing await or return on a promise, a"
        " callback that is never called, or a real dependency "
        "(network, timer) that should be stubbed with {stub}.",
        "{test} 没有结束({where}):检查是否漏了 await/return、回调从未被调用,"
        "或外部依赖(网络、定时器)没有用 {stub} stub。",
    ),
    # --- HTTP status mismatches (expected, got)
    Rule(
        "status-401-got-500",
        _ALL,
        (),
        "Wrong credentials crash the handler instead of answering 401; in the auth path tested at"
        " {test_where}, handle the unknown-user and wrong-password cases explicitly (a null user reaching"
        " the password check is the usual cause).",
        "凭据错误应返 401 而不是 500;检查 {test_where} 所测的认证路径是否显式处理了用户不存在和密码错误"
        "(常见原因是 null 用户进入了密码比对),并用 try/catch 兜底返回 401。",
        status=("401", "500"),
    ),
    Rule(
        "status-400-got-500",
        _ALL,
        (),
        "Invalid input crashes the handler instead of answering 400; validate the request body in"
        " the route tested at {test_where} (missing or wrong-typed fields) before passing it to the service.",
        "参数校验错误应返 400 而不是 500;在 {test_where} 所测的路由里先校验请求体(缺字段、类型不对),"
        "通过后再交给 service。",
        status=("400", "500"),
    ),
    Rule(
        "status-404-got-200",
        _ALL,
        (),
        "A missing resource is answered 200; in the handler tested at {test_where}, check the"
        " lookup's result and answer 404 when nothing was found instead of returning null or an empty body.",
        "不存在的资源不应返回 200;在 {test_where} 所测的处理函数里判断查询结果,查不到就返回 404,"
        "而不是返回 null 或空内容。",
        status=("404", "200"),
    ),
    Rule(
        "status-4xx-got-500",
        _ALL,
        (),
        "The handler throws where it should answer {expected}; find the unguarded access or call in"
        " the route tested at {test_where} and turn that case into an explicit {expected} answer.",
        "处理函数在应返回 {expected} 的情况下抛了异常;在 {test_where} 所测的路由里找到没有判断的访问"
        "或调用,把这种情况显式返回 {expected}。",
        status=("4xx", "500"),
    ),
    Rule(
        "status-2xx-got-500",
        _ALL,
        (),
        "The handler crashes on a valid request; the server log or the stack of the route tested"
        " at {test_where} names the line that throws (often an undefined field or a failed query).",
        "合法请求也让处理函数崩溃了;看服务端日志或 {test_where} 所测路由的调用栈,"
        "找到抛异常的那一行(常见是访问了 undefined 字段或查询失败)。",
        status=("2xx", "500"),
    ),
    Rule(
        "status-got-404",
        _ALL,
        (),
        "The request reached no route (404); compare the method and path used at {test_where} with"
        " the routes the app registers (prefix such as /api, trailing slash, router not mounted).",
        "请求没有命中任何路由(404);对比 {test_where} 用的方法和路径与应用注册的路由(/api 前缀、"
        "末尾斜杠、router 没挂载)。",
        status=("*", "404"),
    ),
    Rule(
        "status-4xx-got-2xx",
        _ALL,
        (),
        "The request the test sends at {test_where} should be refused with {expected} but is"
        " accepted; the check for this case (validation, auth or existence) is missing in the route.",
        "{test_where} 发送的请求本应以 {expected} 拒绝却被接受了;路由里缺少这类情况的检查"
        "(参数校验、鉴权或存在性判断)。",
        status=("4xx", "2xx"),
    ),
    Rule(
        "status-2xx-got-4xx",
        _ALL,
        (),
        "A request the test considers valid is refused with {got}; compare the body and headers"
        " sent at {test_where} with what the route's validation or auth requires.",
        "测试认为合法的请求被以 {got} 拒绝;对比 {test_where} 发送的请求体和请求头与路由的校验、鉴权要求。",
        status=("2xx", "4xx"),
    ),
    Rule(
        "status-other",
        _ALL,
        (),
        "The route tested at {test_where} answers {got} where {expected} is expected; find the"
        " branch that chooses the status for this input and check its condition.",
        "{test_where} 所测的路由对该输入返回 {got},而期望是 "
        "{expected};找到为这种输入决定状态码的分支,检查其条件。",
        status=("*", "*"),
    ),
    # --- null / undefined / missing keys and names
    Rule(
        "js-property-of-undefined",
        _M,
        (r"Cannot read propert(?:y|ies) of (?P<what>undefined|null)(?: \(reading '(?P<prop>[^']+)'\))?",),
        "At {where} the code reads '{prop}' from a value that is {what}; check that the object"
        " (often a request body field or a lookup result) exists before using it.",
        "{where} 处从一个 {what} 的值上读取 '{prop}';"
        "使用前先判断该对象(常见是请求体字段或查询结果)是否存在。",
    ),
    Rule(
        "py-none-attribute",
        _M,
        (r"'NoneType' object has no attribute '(?P<prop>[^']+)'",),
        "At {where} the code calls .{prop} on None; the lookup or function before it returned"
        " None (not found, or a missing return), so handle that case first.",
        "{where} 处在 None 上访问 .{prop};之前的查询或函数返回了 None(没查到或漏了 return),先处理这种情况。",
    ),
    Rule(
        "py-key-error",
        _M,
        (r"KeyError: (?P<key>[^\n]{1,60})",),
        "At {where} the code indexes a dict with {key}, which is not there; use .get() with a"
        " default or check that the data (request body, config, row) really carries that key.",
        "{where} 处用 {key} 取字典值但该键不存在;改用 "
        ".get() 给默认值,或确认数据(请求体、配置、行)确实带这个键。",
    ),
    Rule(
        "py-argument-count",
        _M,
        (
            r"TypeError: (?P<func>[\w.<>]+)\(\) (?P<detail>(?:takes|missing|got an unexpected keyword"
            r" argument|got multiple values)[^\n]{0,80})",
        ),
        "{func}() is called with other arguments than it accepts ({detail}) at {where}; compare"
        " the call with the function's signature and update whichever side changed.",
        "在 {where} 调用 {func}() 的参数与其签名不符({detail});对照函数签名,修正调用方或定义中改动过的一方。",
    ),
    Rule(
        "js-not-a-function",
        _M,
        (r"(?P<name>[\w.$\[\]'\"]+) is not a function",),
        "{name} is not a function at {where}; the module does not export it under that name"
        " (check the export and the import style: default vs named, CommonJS vs ESM).",
        "{where} 处的 {name} 不是函数;模块没有以这个名字导出它(检查导出与导入方式:"
        "default 还是具名、CommonJS 还是 ESM)。",
    ),
    Rule(
        "not-defined",
        _M,
        (r"(?:ReferenceError: |NameError: name ')(?P<name>[\w$]+)'? is not defined",),
        "'{name}' is used at {where} but never declared or imported there; import it or define it"
        " in that scope.",
        "{where} 处使用了 '{name}',但那里从未声明或导入;导入它或在该作用域中定义。",
    ),
    # --- assertion shapes
    Rule(
        "snapshot-mismatch",
        _M,
        (
            r"Snapshot [^\n]*mismatched|toMatch(?:Inline)?Snapshot|Snapshot name:"
            r"|snapshot (?:does not|doesn't) match",
        ),
        "The output of {test} no longer matches its stored snapshot ({test_where}); if the change"
        " is intended, update the snapshot (-u), otherwise find what changed the rendering.",
        "{test} 的输出与保存的快照不再一致({test_where});"
        "若改动是有意的就更新快照(-u),否则找出是什么改变了输出。",
    ),
    Rule(
        "did-not-raise",
        _M,
        (
            r"DID NOT RAISE|instead of rejecting|did not throw|Missing expected (?:exception|rejection)"
            r"|Expected the function to throw",
        ),
        "{test} expects an error for this input but the code accepts it ({test_where}); the"
        " validation that should raise or reject is missing in the function under test.",
        "{test} 期望该输入报错,但代码接受了它({test_where});被测函数里缺少应当抛出或拒绝的校验。",
    ),
    Rule(
        "collection-length",
        _M,
        (r"to have a length of|toHaveLength|Expected length",),
        "The collection has {got} item(s) where {test} expects {expected}; check the filter or"
        " query that builds it and the data the test prepared ({test_where}).",
        "集合里有 {got} 个元素,而 {test} 期望 {expected} 个;"
        "检查构造它的过滤条件或查询,以及测试准备的数据({test_where})。",
    ),
    Rule(
        "collection-items",
        _M,
        (r"(?P<side>Right|Left) contains (?P<detail>[^\n]+)",),
        "The list returned to {test} does not hold the expected items ({side} side contains {detail});"
        " check the filter or query that builds it and the data the test prepared ({test_where}).",
        "返回给 {test} 的列表元素与期望不符({side} 侧包含 {detail});检查构造它的过滤条件或查询,"
        "以及测试准备的数据({test_where})。",
    ),
    Rule(
        "deep-equal",
        _M,
        (r"deeply equal|deep[- ]equal|toEqual|toStrictEqual|Differing items|Full diff|\+ actual - expected",),
        "The object returned to {test} differs from the expected one{diff}; check how the code"
        " builds that value (defaults, field names, types) for the input used at {test_where}.",
        "返回给 {test} 的对象与期望不同{diff};检查代码在 "
        "{test_where} 这组输入下如何构造该值(默认值、字段名、类型)。",
    ),
    Rule(
        "returned-value",
        _M,
        (r"(?:^|\n)[\s+]*where (?P<value>[^\n]+?) = (?P<call>[\w.]+)\((?P<args>[^\n]{0,80})\)\s*(?:\n|$)",),
        "{call}({args}) returned {value} where {test} expects {wanted}; the computation inside"
        " {call} is the likely culprit: follow it with that input ({test_where}).",
        "{call}({args}) 返回了 {value},而 {test} 期望 {wanted};问题很可能出在 {call} 内部的计算:"
        "用这组输入逐步检查它({test_where})。",
    ),
    Rule(
        "zero-division",
        _M,
        (r"ZeroDivisionError|division by zero",),
        "The code divides by zero at {where}, which happens for empty input; guard the empty case"
        " (return 0 or refuse the input) before dividing.",
        "{where} 处除以零,通常出现在输入为空时;除法前先处理空输入(返回 0 或拒绝该输入)。",
    ),
    Rule(
        "unhandled-rejection",
        _M,
        (r"Unhandled ?(?:Promise ?)?Rejection|unhandled error|uncaught exception",),
        "An error escaped outside the test's await chain ({where}); await every promise the code"
        " starts (or return it) so the failure lands in the test that caused it.",
        "有错误逃出了测试的 await 链({where});对代码启动的每个 "
        "promise 都 await(或 return),让失败落在引起它的测试里。",
    ),
    # --- failures outside a test body, when nothing above explains them
    Rule(
        "load-failure",
        ("kind",),
        (r"^load$",),
        "{test} could not be loaded ({first}), so none of its tests ran; fix the import or the"
        " code it loads, starting at {where}.",
        "{test} 无法加载({first}),其中的测试一个都没跑;从 {where} 开始修正导入或被加载的代码。",
    ),
    Rule(
        "hook-failure",
        ("kind",),
        (r"^hook$",),
        "A setup or teardown step (beforeAll/beforeEach, fixture) of {test} failed ({first}), so"
        " the tests it prepares did not run; look at {where}.",
        "{test} 的准备或清理步骤(beforeAll/beforeEach、fixture)失败({first}),"
        "依赖它的测试没有运行;查看 {where}。",
    ),
    # --- the fallback: always matches
    Rule(
        "fallback",
        _ALL,
        (),
        "{test} failed: it expects {expectation}; start at {where}, where the failure is raised,"
        " and check the values the code passes along just before it.",
        "{test} 失败:期望 {expectation};从抛出失败的 {where} 看起,检查其前一步代码传入的值。",
    ),
)

# Frames that are not the user's code.
_NOT_USER = re.compile(
    r"node_modules|node:internal|node:async_hooks|\(node:|<anonymous>|site-packages|dist-packages"
    r"|/lib/python\d|<frozen |_pytest/|/pluggy/|importlib/"
)
_JS_FRAME = re.compile(
    r"(?:at .*?\(|at (?:async )?)(?:file://)?(?P<path>[^\s()]+?):(?P<line>\d+)(?::\d+)?\)?\s*$"
)
_PY_FRAME = re.compile(
    r"(?:File \"(?P<path1>[^\"]+)\", line (?P<line1>\d+)|^(?P<path2>[^\s:]+\.py):(?P<line2>\d+))"
)
_STATUS = re.compile(r"^[1-5]\d\d$")
_STATUS_PAIRS = (
    # vitest/chai: "expected 500 to be 401"; node: "500 !== 401", "500 == 400"; pytest: "assert 500 == 401"
    re.compile(r"expected (?P<got>[1-5]\d\d) to (?:be|equal|strictly equal) (?P<exp>[1-5]\d\d)\b"),
    re.compile(r"^\s*(?:assert )?(?P<got>[1-5]\d\d) (?:!==|!=|===|==) (?P<exp>[1-5]\d\d)\s*$", re.M),
    re.compile(r"Expected: (?P<exp>[1-5]\d\d)\s*\n\s*Received: (?P<got>[1-5]\d\d)"),
    # supertest: 'expected 401 "Unauthorized", got 500 "Internal Server Error"'
    re.compile(r"expected (?P<exp>[1-5]\d\d) \"[^\"]*\", got (?P<got>[1-5]\d\d)"),
)
_STUBS: Mapping[str, tuple[str, str]] = {
    "vitest": ("vi.spyOn / vi.mock", "vi.spyOn / vi.mock"),
    "jest": ("jest.spyOn / jest.mock", "jest.spyOn / jest.mock"),
    "node:test": ("node:test's mock.method / mock.timers", "node:test 的 mock.method / mock.timers"),
    "pytest": ("monkeypatch (or a fake server fixture)", "monkeypatch(或伪服务 fixture)"),
}
_STUB_DEFAULT = ("a stub or fake", "stub 或伪实现")


def _short(value: str | None) -> str:
    text = " ".join((value or "").split())
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def top_user_frame(failure: Failure) -> str | None:
    """The first stack frame in the user's code as `file:line`, else the test's file:line."""
    for raw in failure.stack.splitlines():
        line = raw.strip()
        if not line or _NOT_USER.search(line):
            continue
        m = _JS_FRAME.search(line)
        if m:
            return f"{m.group('path')}:{m.group('line')}"
        p = _PY_FRAME.search(line)
        if p:
            path = p.group("path1") or p.group("path2")
            return f"{path}:{p.group('line1') or p.group('line2')}"
    return _test_where(failure)


def _test_where(failure: Failure) -> str | None:
    if failure.file:
        return f"{failure.file}:{failure.line}" if failure.line else failure.file
    return None


def _status_pair(failure: Failure) -> tuple[int, int] | None:
    exp, got = (failure.expected or "").strip(), (failure.got or "").strip()
    if _STATUS.match(exp) and _STATUS.match(got):
        return int(exp), int(got)
    for pattern in _STATUS_PAIRS:
        m = pattern.search(failure.message)
        if m:
            return int(m.group("exp")), int(m.group("got"))
    return None


def _status_ok(want: str, code: int) -> bool:
    if want == "*":
        return True
    if want.endswith("xx"):
        return str(code)[0] == want[0]
    return str(code) == want


_PAIR = re.compile(r"['\"]?([\w$]+)['\"]?\s*:\s*('[^']*'|\"[^\"]*\"|[^,}\]]+)")


def _diff_key(failure: Failure) -> str | None:
    """The first key whose value differs between expected and got (JSON, JS or Python notation)."""
    exp: dict[str, str] = {str(k): str(v).strip() for k, v in _PAIR.findall(failure.expected or "")}
    got: dict[str, str] = {str(k): str(v).strip() for k, v in _PAIR.findall(failure.got or "")}
    if exp and got:
        for key in [*exp, *(k for k in got if k not in exp)]:
            if exp.get(key) != got.get(key):
                return key
    text = failure.message
    for pattern in (
        r"^\s*\{'(?P<key>[^']+)': [^\n]*\} != \{",  # pytest "Differing items"
        r"^\s*[-+]\s+\"?(?P<key>[\w$]+)\"?: ",  # jest / node diff lines
    ):
        m = re.search(pattern, text, re.M)
        if m:
            return m.group("key")
    return None


def _fields(failure: Failure, fields: Iterable[Field]) -> str:
    return "\n".join(getattr(failure, f) or "" for f in fields)


def _find(failure: Failure) -> tuple[Rule, dict[str, str]]:
    pair = _status_pair(failure)
    for rule in RULES:
        groups: dict[str, str] = {}
        if rule.status is not None:
            if pair is None or not (
                _status_ok(rule.status[0], pair[0]) and _status_ok(rule.status[1], pair[1])
            ):
                continue
            groups.update(expected=str(pair[0]), got=str(pair[1]))
        text = _fields(failure, rule.fields)
        matched = True
        for pattern in rule.patterns:
            m = re.search(pattern, text, re.IGNORECASE | re.DOTALL)
            if m is None:
                matched = False
                break
            groups.update({k: v for k, v in m.groupdict().items() if v is not None})
        if matched:
            return rule, groups
    raise AssertionError("the fallback rule always matches")  # pragma: no cover


def match(failure: Failure) -> str:
    """The id of the rule that explains `failure` ("fallback" when none does)."""
    return _find(failure)[0].id


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise UsageError(f"hint_language must be one of {', '.join(LANGUAGES)}, not {language!r}")


def hint_for(failure: Failure, *, framework: str | None = None, language: str = "en") -> str:
    """One or two sentences naming the likely cause of `failure` and where to look."""
    _check_language(language)
    rule, groups = _find(failure)
    zh = language == "zh"
    where = top_user_frame(failure)
    test_where = _test_where(failure) or where
    fw = framework or ("pytest" if ".py" in (failure.file or failure.stack) else None)
    stub = _STUBS.get(fw or "", _STUB_DEFAULT)[1 if zh else 0]
    expected, got = _short(failure.expected), _short(failure.got)
    first = _short(failure.message.strip().splitlines()[0] if failure.message.strip() else "")
    if expected and got:
        expectation = f"{expected}(实际 {got})" if zh else f"{expected} (got {got})"
    elif expected:
        expectation = expected
    else:
        expectation = (
            (f"断言成立({first})" if first else "测试通过")
            if zh
            else (f"its assertion to hold ({first})" if first else "the test to pass")
        )
    key = _diff_key(failure)
    values: dict[str, str] = {
        "test": f"“{failure.test}”" if zh else f"'{failure.test}'",
        "where": where or ("测试代码" if zh else "the test's code"),
        "test_where": test_where or ("测试文件" if zh else "the test file"),
        "expected": expected or groups.get("expected", ""),
        "wanted": expected or ("另一个值" if zh else "a different value"),
        "got": got or groups.get("got", ""),
        "stub": stub,
        "expectation": expectation,
        "diff": (f"(首个差异字段:{key})" if zh else f" (first difference: '{key}')") if key else "",
        "first": first or ("无信息" if zh else "no message"),
        "module": "",
        "url": "",
        "what": "undefined",
        "prop": "?",
    }
    values.update({k: _short(v) for k, v in groups.items() if k not in ("expected", "got") or not values[k]})
    return (rule.zh if zh else rule.en).format_map(values)


def apply(
    failures: Iterable[Failure], *, framework: str | None = None, language: str = "en"
) -> tuple[Failure, ...]:
    """Copies of `failures` whose empty hints are filled (a hint already written is kept)."""
    _check_language(language)
    return tuple(
        f if f.hint.strip() else f._replace(hint=hint_for(f, framework=framework, language=language))
        for f in failures
    )
