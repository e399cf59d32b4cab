"""Failure -> hint: one or two sentences naming the likely cause and where to look.

The knowledge lives in RULES, a plain table. Each rule lists the fields of the failure it reads
(message, stack, expected, got), the regular expressions that must all match there, an optional
HTTP status condition on (expected, got), and a message template in English and Chinese. The
first rule that matches wins; the last one always matches and still names the test, what it
expected and the top frame in the user's code.

A hint names three things (docs/architecture.md, "A hint says only what the evidence
shows"): the failing expression, the values that differ, and the place in the user's code
that produced them. That place is the deepest frame of the stack in the workspace that is
neither the test file nor a dependency, named
`function (file:line)`; when an assertion failed after the code under test returned, the stack
holds only the test's line, and the place is the definition of the function the failing line
called (found through the test file's imports, hint_source.py). Without either, the hint names
the test's line, never an invented place. What the values show (off by one, a factor of 100, a
swapped pair, a missing return …) comes from hint_values.py and is said only when a plain test on
the two values holds.

Templates may use: {test} (the test's name), {where} (the place in the user's code as
`function (file:line)`, else the test's file:line), {test_where} (the test's own file:line),
{code} (` (`the source line`)` at {where}, or empty), {expected}, {got} (shortened), {stub}
(how to stub a dependency in this framework), {diff} (the first differing key of a deep
comparison, if one can be read), the db_* parts of a constraint failure, {subscript} (the
lookup that raised a KeyError), {suggest} (what the evidence shows, as a clause or empty), and
the named groups of the rule's patterns. Assertion failures whose values can be read
(VALUE_RULES) get the composed value hint instead of their template.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, NamedTuple

from greenloop.errors import UsageError
from greenloop.model import Failure

if TYPE_CHECKING:  # the helpers load with the first failure: a green run never needs them
    from greenloop.hints.source import Call, Sources

__all__ = [
    "LANGUAGES",
    "RULES",
    "VALUE_RULES",
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
    # only for a test whose stack reaches the user's code outside the test file (else skipped)
    needs_code_frame: bool = False
    # lowercase words one of which the text must hold: a substring test that spares the
    # case-insensitive patterns (the slowest part of a hint) on the many failures they cannot match
    words: tuple[str, ...] = ()


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
        words=("cannot find module", "failed to load url", "err_module_not_found"),
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
        words=("syntaxerror",),
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
            r"|(?:null|undefined|NoneType)[^\n]{0,200}(?:hash|password)"
            r"|(?:bcrypt|compare)[^\n]{0,200}(?:null|undefined)",
        ),
        "The password is compared against a user that was not found (null): at {where} look the"
        " user up first and answer 401 when it is missing, before calling bcrypt.compare.",
        "用户不存在时不要 bcrypt.compare(null, …):在 {where} 先查用户,查不到直接返回 401,再做密码比对。",
        words=("illegal arguments", "hash", "password", "bcrypt", "compare"),
    ),
    Rule(
        "db-constraint",
        _MS,
        (
            r"(?P<constraint>SQLITE_CONSTRAINT\w*|IntegrityError|(?:UNIQUE|FOREIGN KEY|NOT NULL|CHECK)"
            r" constraint failed[^\n]{0,200}|duplicate key value violates unique constraint|ER_DUP_ENTRY)",
        ),
        "{db_what} in {where}{db_value}; {db_fix}.",
        "{where} 处{db_what}{db_value};{db_fix}。",
        words=("constraint", "integrityerror", "duplicate", "er_dup_entry"),
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
        words=(
            "econnrefused",
            "connection",
            "fetch failed",
            "enotfound",
            "eai_again",
            "getaddrinfo",
            "max retries",
            "connecterror",
            "connecttimeout",
            "etimedout",
        ),
    ),
    Rule(
        "timeout",
        _M,
        # the runners' own timeout words only: a key or variable named "timeout" in another
        # error (KeyError: 'timeout_ms') is not a test that never finished
        (
            r"\A(?!\s*(?:\w+\.)*(?:KeyError|AttributeError|NameError|TypeError|ValueError|IndexError)\b)"
            r"(?:.*?)(?:\btimed out\b|Exceeded timeout|STACK_TRACE_ERROR|Timeout \(>[\d.]+s\)"
            r"|Test timeout of|async callback was not invoked)",
        ),
        "{test} never finished ({where}): look for a missing await or return on a promise, a"
        " callback that is never called, or a real dependency "
        "(network, timer) that should be stubbed with {stub}.",
        "{test} 没有结束({where}):检查是否漏了 await/return、回调从未被调用,"
        "或外部依赖(网络、定时器)没有用 {stub} stub。",
        words=(
            "timed out",
            "exceeded timeout",
            "stack_trace_error",
            "timeout (",
            "test timeout of",
            "async callback",
        ),
    ),
    # --- HTTP status mismatches (expected, got)
    Rule(
        "status-401-got-500",
        _ALL,
        (),
        "Wrong credentials crash the handler instead of answering 401; in the auth path tested at"
        " {test_where}{test_call}, handle the unknown-user and wrong-password cases explicitly"
        " (a null user reaching the password check is the usual cause).",
        "凭据错误应返 401 而不是 500;检查 {test_where}{test_call} 所测的认证路径"
        "是否显式处理了用户不存在和密码错误(常见原因是 null 用户进入了密码比对),"
        "并用 try/catch 兜底返回 401。",
        status=("401", "500"),
    ),
    Rule(
        "status-400-got-500",
        _ALL,
        (),
        "Invalid input crashes the handler instead of answering 400; validate the request body in"
        " the route tested at {test_where}{test_call} (missing or wrong-typed fields) before passing"
        " it to the service.",
        "参数校验错误应返 400 而不是 500;在 {test_where}{test_call} 所测的路由里"
        "先校验请求体(缺字段、类型不对),通过后再交给 service。",
        status=("400", "500"),
    ),
    Rule(
        "status-404-got-200",
        _ALL,
        (),
        "A missing resource is answered 200; in the handler tested at {test_where}{test_call}, check the"
        " lookup's result and answer 404 when nothing was found instead of returning null or an empty body.",
        "不存在的资源不应返回 200;在 {test_where}{test_call} 所测的处理函数里判断查询结果,查不到就返回 404,"
        "而不是返回 null 或空内容。",
        status=("404", "200"),
    ),
    Rule(
        "status-4xx-got-500",
        _ALL,
        (),
        "The handler throws where it should answer {expected}; find the unguarded access or call in"
        " the route tested at {test_where}{test_call} and turn that case into an explicit {expected} answer.",
        "处理函数在应返回 {expected} 的情况下抛了异常;在 {test_where}{test_call} 所测的路由里"
        "找到没有判断的访问或调用,把这种情况显式返回 {expected}。",
        status=("4xx", "500"),
    ),
    Rule(
        "status-2xx-got-500",
        _ALL,
        (),
        "The handler crashes on a valid request; the server log or the stack of the route tested"
        " at {test_where}{test_call} names the line that throws (often an undefined field or a"
        " failed query).",
        "合法请求也让处理函数崩溃了;看服务端日志或 {test_where}{test_call} 所测路由的调用栈,"
        "找到抛异常的那一行(常见是访问了 undefined 字段或查询失败)。",
        status=("2xx", "500"),
    ),
    Rule(
        "status-got-404",
        _ALL,
        (),
        "The request reached no route (404); compare the method and path used at {test_where}{test_call} with"
        " the routes the app registers (prefix such as /api, trailing slash, router not mounted).",
        "请求没有命中任何路由(404);对比 {test_where}{test_call} 用的方法和路径与应用注册的路由(/api 前缀、"
        "末尾斜杠、router 没挂载)。",
        status=("*", "404"),
    ),
    Rule(
        "status-4xx-got-2xx",
        _ALL,
        (),
        "The request the test sends at {test_where}{test_call} should be refused with {expected} but is"
        " accepted; the check for this case (validation, auth or existence) is missing in the route.",
        "{test_where}{test_call} 发送的请求本应以 {expected} 拒绝却被接受了;路由里缺少这类情况的检查"
        "(参数校验、鉴权或存在性判断)。",
        status=("4xx", "2xx"),
    ),
    Rule(
        "status-2xx-got-4xx",
        _ALL,
        (),
        "A request the test considers valid is refused with {got}; compare the body and headers"
        " sent at {test_where}{test_call} with what the route's validation or auth requires.",
        "测试认为合法的请求被以 {got} 拒绝;对比 {test_where}{test_call} 发送的请求体和请求头"
        "与路由的校验、鉴权要求。",
        status=("2xx", "4xx"),
    ),
    Rule(
        "status-other",
        _ALL,
        (),
        "The route tested at {test_where}{test_call} answers {got} where {expected} is expected; find the"
        " branch that chooses the status for this input and check its condition.",
        "{test_where}{test_call} 所测的路由对该输入返回 {got},而期望是 "
        "{expected};找到为这种输入决定状态码的分支,检查其条件。",
        status=("*", "*"),
    ),
    # --- null / undefined / missing keys and names
    Rule(
        "js-property-of-undefined",
        _M,
        (r"Cannot read propert(?:y|ies) of (?P<what>undefined|null)(?: \(reading '(?P<prop>[^']+)'\))?",),
        "In {where} the code reads '{prop}' from a value that is {what}{code}; check that the object"
        " (often a request body field or a lookup result) exists before using it.",
        "{where} 处从一个 {what} 的值上读取 '{prop}'{code};"
        "使用前先判断该对象(常见是请求体字段或查询结果)是否存在。",
        words=("cannot read propert",),
    ),
    Rule(
        "py-none-attribute",
        _M,
        (r"'NoneType' object has no attribute '(?P<prop>[^']+)'",),
        "In {where} the code reads .{prop} of None{code}; the lookup or call that gave that value"
        " returned None (not found, or a missing return), so handle that case first.",
        "{where} 处在 None 上访问 .{prop}{code};给出该值的查询或调用返回了 None(没查到或漏了 return),"
        "先处理这种情况。",
    ),
    Rule(
        "py-attribute",
        _M,
        (r"AttributeError: '(?P<typ>\w+)' object has no attribute '(?P<attr>\w+)'",),
        "{where} reads .{attr} of a {typ}{code}, which has no such attribute{suggest}.",
        "{where} 读取 {typ} 的 .{attr}{code},但它没有这个属性{suggest}。",
    ),
    Rule(
        "py-key-error",
        _M,
        (r"KeyError: (?P<key>[^\n]{1,60})",),
        "{where} looks up the key {key}{subscript}, which that dict does not have; compare the key's"
        " spelling with where the dict is built (or use .get() if the key is optional).",
        "{where} 用键 {key} 取值{subscript},但该字典没有这个键;对照构建该字典的代码核对键名"
        "(若该键可有可无,改用 .get())。",
    ),
    Rule(
        "py-index-error",
        _M,
        (r"IndexError: (?P<detail>[^\n]{1,80})",),
        "{where} indexes past the end of a sequence ({detail}){code}{suggest}.",
        "{where} 的下标越界({detail}){code}{suggest}。",
    ),
    Rule(
        "py-operand-types",
        _M,
        (r"TypeError: unsupported operand type\(s\) for (?P<op>\S+): '(?P<left>\w+)' and '(?P<right>\w+)'",),
        "{where} applies {op} to {left} and {right}{code}; one operand has the wrong type, so"
        " convert it where it is read (int(), float() or str()).",
        "{where} 对 {left} 和 {right} 做 {op} 运算{code};其中一个操作数类型不对,在读入它的地方转换"
        "(int()、float() 或 str())。",
    ),
    Rule(
        "py-argument-count",
        _M,
        (
            r"TypeError: (?P<func>[\w.<>]{1,80})\(\) (?P<detail>(?:takes|missing|got an unexpected keyword"
            r" argument|got multiple values)[^\n]{0,80})",
        ),
        "{func}() is called with other arguments than it accepts ({detail}) at {where}; compare"
        " the call with the function's signature and update whichever side changed.",
        "在 {where} 调用 {func}() 的参数与其签名不符({detail});对照函数签名,修正调用方或定义中改动过的一方。",
    ),
    Rule(
        "js-not-a-function",
        _M,
        (r"(?P<name>[\w.$\[\]'\"]{1,80}) is not a function",),
        "{name} is not a function at {where}{code}; check what that value really is there: a module"
        " that does not export it under that name (default vs named, CommonJS vs ESM) or a value of"
        " another type.",
        "{where} 处的 {name} 不是函数{code};检查该值在那里到底是什么:模块没有以这个名字导出它"
        "(default 还是具名、CommonJS 还是 ESM),或是别的类型的值。",
        words=("is not a function",),
    ),
    Rule(
        "not-defined",
        _M,
        (r"(?:ReferenceError: |NameError: name ')(?P<name>[\w$]{1,80})'? is not defined",),
        "'{name}' is used at {where} but never declared or imported there; import it or define it"
        " in that scope.",
        "{where} 处使用了 '{name}',但那里从未声明或导入;导入它或在该作用域中定义。",
        words=("is not defined",),
    ),
    Rule(
        "raised-in-code",
        _M,
        (
            r"\A\s*(?:\w+\.)*(?!AssertionError|ZeroDivisionError)"
            r"(?P<exc>\w*(?:Error|Exception))(?: \[\w+\])?: "
            r"(?P<detail>[^\n]{1,120})",
        ),
        "{exc} '{detail}' is raised in {where}{code}, for the input the test gives at"
        " {test_where}{test_call}; compare that input with the condition that raises.",
        "{where} 抛出 {exc} '{detail}'{code},输入来自测试 {test_where}{test_call};"
        "对照抛出它的条件检查这组输入。",
        needs_code_frame=True,
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
        words=("snapshot",),
    ),
    Rule(
        "did-not-raise",
        _M,
        (
            r"DID NOT RAISE|instead of rejecting|did not throw|Missing expected (?:exception|rejection)"
            r"|Expected the function to throw|expected \[Function[^\]]*\] to throw",
        ),
        "{test} expects an error for this input{test_call} but the code accepts it ({test_where});"
        " the validation that should raise or reject is missing in the function under test{defined}.",
        "{test} 期望该输入{test_call}报错,但代码接受了它({test_where});"
        "被测函数{defined}里缺少应当抛出或拒绝的校验。",
        words=("did not", "instead of rejecting", "missing expected", "to throw"),
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
        "The code divides by zero in {where}{code}, which happens for empty input; guard the empty"
        " case (return 0 or refuse the input) before dividing.",
        "{where} 处除以零{code},通常出现在输入为空时;除法前先处理空输入(返回 0 或拒绝该输入)。",
    ),
    Rule(
        "unhandled-rejection",
        _M,
        (r"Unhandled ?(?:Promise ?)?Rejection|unhandled error|uncaught exception",),
        "An error escaped outside the test's await chain ({where}); await every promise the code"
        " starts (or return it) so the failure lands in the test that caused it.",
        "有错误逃出了测试的 await 链({where});对代码启动的每个 "
        "promise 都 await(或 return),让失败落在引起它的测试里。",
        words=("unhandled", "uncaught"),
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


# Assertion failures: when their values can be read, the composed value hint replaces the template.
VALUE_RULES = frozenset({"deep-equal", "returned-value", "fallback", "collection-length", "collection-items"})

# Frames that are not the user's code.
_NOT_USER = re.compile(
    r"node_modules|node:internal|node:async_hooks|\(node:|<anonymous>\)?$|site-packages|dist-packages"
    r"|/lib/python\d|<frozen |_pytest/|/pluggy/|importlib/"
)
_JS_FRAME = re.compile(
    r"^(?:at\s+|❯\s+)?(?:async\s+)?(?:(?P<fn>[^\s()][^()]*?)\s+\()?(?:file://)?"
    r"(?P<path>[^\s()]+?\.[A-Za-z0-9]+):(?P<line>\d+)(?::\d+)?\)?\s*$"
)
_PY_FRAME = re.compile(
    r"^(?:File \"(?P<path1>[^\"]+)\", line (?P<line1>\d+)(?:, in (?P<fn1>[\w<>.]+))?"
    r"|(?P<path2>[^\s:]+\.py):(?P<line2>\d+)(?::(?: in (?P<fn2>[\w<>.]+))?.*)?)\s*$"
)
_TEST_FILE = re.compile(
    r"(?:^|/)(?:tests?|__tests__|spec)/|(?:^|/)test_[^/]*\.py$|_test\.py$|\.(?:test|spec)\.[cm]?[jt]sx?$"
)
_FN_PREFIX = re.compile(r"^(?:async\s+)?(?:new\s+)?(?:Object|Module|TestContext|Test|Context|Function)\.")
# vitest's text reporter: `❯ titleLength code/service.js:3:21`
_VITEST_FRAME = re.compile(
    r"^❯\s+(?P<fn>[\w$.<>\[\]]+)\s+(?P<path>[^\s()]+?\.[A-Za-z0-9]+):(?P<line>\d+)(?::\d+)?\s*$"
)
_FN_ALIAS = re.compile(r"\[as ([\w$]+)\]")
_MAX_STACK_LINES = 60
_MAX_MESSAGE = 8000  # characters of a message the rules look at (a long diff ends well before)


class Frame(NamedTuple):
    fn: str | None
    path: str
    line: int
    python: bool


def _frames(stack: str) -> list[Frame]:
    """The stack's frames in the order written (JS: deepest first; Python: outermost first)."""
    out: list[Frame] = []
    for raw in stack[: _MAX_STACK_LINES * 400].splitlines()[:_MAX_STACK_LINES]:
        line = raw.strip()[:400]  # a frame line is short; a longer one is not a frame worth reading
        if not line or _NOT_USER.search(line):
            continue
        p = _PY_FRAME.match(line)
        if p:
            path = p.group("path1") or p.group("path2")
            fn = p.group("fn1") or p.group("fn2")
            out.append(
                Frame(
                    fn if fn and fn != "<module>" else None,
                    path,
                    int(p.group("line1") or p.group("line2")),
                    True,
                )
            )
            continue
        m = _JS_FRAME.match(line) or _VITEST_FRAME.match(line)
        if m:
            fn = _FN_PREFIX.sub("", m.group("fn") or "").strip() or None
            alias = _FN_ALIAS.search(fn or "")
            if alias:  # V8's `Object.length [as titleLength]`: the name it was called by
                fn = alias.group(1)
            if fn and ("<anonymous>" in fn or " " in fn):
                fn = None
            out.append(Frame(fn, m.group("path"), int(m.group("line")), False))
    return out


def _test_file(failure: Failure, frames: list[Frame]) -> str | None:
    head = failure.test.split("::", 1)[0]
    if "::" in failure.test and head.endswith(".py"):
        return head
    if failure.file and _TEST_FILE.search(failure.file):
        return failure.file
    for f in frames:
        if _TEST_FILE.search(f.path):
            return f.path
    return failure.file


def _code_frame(frames: list[Frame], test_file: str | None) -> Frame | None:
    """The deepest frame in the workspace that is not the test file (dependencies are dropped).
    The parsers make paths in the workspace relative, so when the stack has relative paths an
    absolute one lies outside the workspace (a global install, the interpreter's library)."""
    relative = any(not f.path.startswith("/") for f in frames)
    own = [
        f
        for f in frames
        if f.path != test_file and not f.path.startswith("../") and not (relative and f.path.startswith("/"))
    ]
    if not own:
        return None
    if frames[0].python:
        # Python tracebacks run outermost first; greenloop's older records stored them reversed,
        # with the test's frame last
        return own[0] if frames[-1].path == test_file and frames[0].path != test_file else own[-1]
    return own[0]


def top_user_frame(failure: Failure) -> str | None:
    """The deepest frame in the user's code (not the test file) as `file:line`, else the test's."""
    frames = _frames(failure.stack)
    code = _code_frame(frames, _test_file(failure, frames))
    if code is not None:
        return f"{code.path}:{code.line}"
    if frames:
        return f"{frames[0].path}:{frames[0].line}"
    return _test_where(failure)


def _test_where(failure: Failure) -> str | None:
    if failure.file:
        return f"{failure.file}:{failure.line}" if failure.line else failure.file
    return None


class _Evidence(NamedTuple):
    """What the failure and the workspace's source say, computed once per failure."""

    test_file: str | None
    test_line: int | None
    test_where: str | None
    code: Frame | None  # the deepest frame in the user's code, not the test file
    code_fn: str | None
    code_line: str | None  # the source line at `code`
    call: Call | None  # the call the test's failing line makes


def _evidence(failure: Failure, sources: Sources | None) -> _Evidence:
    frames = _frames(failure.stack)
    test_file = _test_file(failure, frames)
    in_test = [f for f in frames if f.path == test_file]
    test_line: int | None = None
    if in_test:
        test_line = (in_test[-1] if in_test[0].python else in_test[0]).line
    elif failure.file == test_file:
        test_line = failure.line
    if test_file and test_line:
        test_where: str | None = f"{test_file}:{test_line}"
    elif test_file and test_file != failure.file:
        test_where = test_file
    else:
        test_where = _test_where(failure)
    code = _code_frame(frames, test_file)
    code_fn = code.fn if code else None
    code_line = None
    call = None
    if sources is not None:
        if code is not None:
            code_fn = code_fn or sources.function_at(code.path, code.line)
            code_line = sources.line(code.path, code.line)
        call = sources.call_at(test_file, test_line)
    return _Evidence(test_file, test_line, test_where, code, code_fn, code_line, call)


def _place(ev: _Evidence) -> str | None:
    if ev.code is None:
        return None
    at = f"{ev.code.path}:{ev.code.line}"
    return f"{ev.code_fn} ({at})" if ev.code_fn else at


def _quote(code: str | None, limit: int = 70) -> str:
    if not code:
        return ""
    text = code if len(code) <= limit else code[: limit - 1] + "…"
    return f" (`{text}`)"


def _status_pair(failure: Failure) -> tuple[int, int] | None:
    exp, got = (failure.expected or "").strip(), (failure.got or "").strip()
    if _STATUS.match(exp) and _STATUS.match(got):
        return int(exp), int(got)
    for pattern in _STATUS_PAIRS:
        m = pattern.search(failure.message[:_MAX_MESSAGE])
        if m:
            return int(m.group("exp")), int(m.group("got"))
    return None


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
    text = " ".join((value or "")[: _MAX_VALUE * 4].split())
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def _status_ok(want: str, code: int) -> bool:
    if want == "*":
        return True
    if want.endswith("xx"):
        return str(code)[0] == want[0]
    return str(code) == want


_PAIR = re.compile(r"['\"]?([\w$]{1,60})['\"]?\s*:\s*('[^']{0,200}'|\"[^\"]{0,200}\"|[^,}\]]{1,200})")
_DIFF_KEYS = (
    re.compile(r"^\s*\{'(?P<key>[^']+)': [^\n]*\} != \{", re.M),  # pytest "Differing items"
    re.compile(r"^\s*[-+]\s+\"?(?P<key>[\w$]+)\"?: ", re.M),  # jest / node diff lines
)


def _diff_key(failure: Failure) -> str | None:
    """The first key whose value differs between expected and got (JSON, JS or Python notation)."""
    exp: dict[str, str] = {str(k): str(v).strip() for k, v in _PAIR.findall((failure.expected or "")[:2000])}
    got: dict[str, str] = {str(k): str(v).strip() for k, v in _PAIR.findall((failure.got or "")[:2000])}
    if exp and got:
        for key in [*exp, *(k for k in got if k not in exp)]:
            if exp.get(key) != got.get(key):
                return key
    text = failure.message[:_MAX_MESSAGE]
    for pattern in _DIFF_KEYS:
        m = pattern.search(text)
        if m:
            return m.group("key")
    return None


def _fields(failure: Failure, fields: Iterable[Field]) -> str:
    return "\n".join((getattr(failure, f) or "")[:_MAX_MESSAGE] for f in fields)


# Every rule's patterns, compiled on first use (once per process: a run with thousands of
# failures tries them all per failure; a green run never compiles them).
_COMPILED: dict[str, tuple[re.Pattern[str], ...]] = {}


def _patterns(rule: Rule) -> tuple[re.Pattern[str], ...]:
    found = _COMPILED.get(rule.id)
    if found is None:
        found = tuple(re.compile(p, re.IGNORECASE | re.DOTALL) for p in rule.patterns)
        _COMPILED[rule.id] = found
    return found


def _find(failure: Failure, ev: _Evidence | None = None) -> tuple[Rule, dict[str, str]]:
    pair = _status_pair(failure)
    texts: dict[tuple[Field, ...], str] = {}
    lowered: dict[tuple[Field, ...], str] = {}
    for rule in RULES:
        groups: dict[str, str] = {}
        if rule.status is not None:
            if pair is None or not (
                _status_ok(rule.status[0], pair[0]) and _status_ok(rule.status[1], pair[1])
            ):
                continue
            groups.update(expected=str(pair[0]), got=str(pair[1]))
        # (a setup hook's or a load's own error is said by the hook and load rules below)
        if rule.needs_code_frame and (ev is None or ev.code is None or failure.kind != "test"):
            continue
        if rule.fields not in texts:
            texts[rule.fields] = _fields(failure, rule.fields)
        text = texts[rule.fields]
        if rule.words:
            if rule.fields not in lowered:
                lowered[rule.fields] = text.lower()
            if not any(w in lowered[rule.fields] for w in rule.words):
                continue
        matched = True
        for pattern in _patterns(rule):
            m = pattern.search(text)
            if m is None:
                matched = False
                break
            groups.update({k: v for k, v in m.groupdict().items() if v is not None})
        if matched:
            return rule, groups
    raise AssertionError("the fallback rule always matches")  # pragma: no cover


def match(failure: Failure) -> str:
    """The id of the rule that explains `failure` ("fallback" when none does)."""
    return _find(failure, _evidence(failure, None))[0].id


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise UsageError(f"hint_language must be one of {', '.join(LANGUAGES)}, not {language!r}")


# --- database constraints: which constraint, on which column, with which value
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


def _db_parts(text: str, ev: _Evidence, error: str, zh: bool) -> dict[str, str]:
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


# --- the composed hint of an assertion whose values can be read
_WHERE_LINE = re.compile(r"^\s*\+\s*where (?P<value>.+?) = (?P<call>.+?)\s*$", re.M)
_FUNC_REPR = re.compile(r"<(?:function|bound method) ([\w.]+)(?: of [^>]*)? at 0x[0-9a-f.]+>")
_ASSERT_LINE = re.compile(r"^(?:AssertionError: )?assert (?P<got>.+?) (?:==|is) (?P<exp>.+?)\s*$", re.M)
_NODE_PAIR = re.compile(
    r"^(?P<got>[^\n]{1,200}?) !==? (?P<exp>[^\n]{1,200})$", re.M
)  # node: actual !== expected
_CALL_TEXT = re.compile(r"^((?:[A-Za-z_$][\w$]*\.)*)([A-Za-z_$][\w$]*)\(")
_JS_FRAMEWORKS = ("vitest", "jest", "node:test")
_PY_WORDS = re.compile(r"\b(True|False|None)\b")
_TO_JS = {"True": "true", "False": "false", "None": "null"}


def _pytest_call(message: str) -> tuple[Call | None, str | None, bool]:
    """(call, its value, counted) from pytest's `where` lines, `<function f at 0x…>` named.
    `assert len(x) == 3` makes the first `where` a len(): the call is then the one that built
    x, the value is the count, and counted is True."""
    wheres = list(_WHERE_LINE.finditer(message[:_MAX_MESSAGE]))
    if not wheres:
        return None, None, False
    first = wheres[0]
    counted = first.group("call").startswith("len(")
    target: re.Match[str] | None = first
    if counted:
        arg = first.group("call")[4:-1]
        target = next((w for w in wheres[1:] if w.group("value") == arg), None)
    if target is None:
        return None, first.group("value"), counted
    text = target.group("call")
    for sub in wheres:
        if sub.group("value").startswith("<"):
            text = text.replace(sub.group("value"), sub.group("call"))
    text = _FUNC_REPR.sub(lambda f: f.group(1), text)
    c = _CALL_TEXT.match(text)
    if not c:
        return None, first.group("value"), counted
    shown = text if len(text) <= 80 else text[:79] + "…"
    from greenloop.hints.source import Call

    return Call(c.group(1).rstrip("."), c.group(2), shown), first.group("value"), counted


def _shown(text: str | None, node: bool) -> str:
    """A printed value as the hint quotes it: node's multi-line objects on one line, node's bare
    strings quoted (node:test prints them without quotes), long values shortened."""
    if text is None:
        return ""
    from greenloop.hints import values as hint_values

    value = hint_values.parse_value(text)
    if hint_values.is_parsed(value) and (
        "\n" in text.strip() or (node and isinstance(value, str) and value == text.strip())
    ):
        return hint_values.show(value)
    return _short(text)


def _body(call: str | None, tw: str, got: str, exp: str, detail: str, shortened: bool, zh: bool) -> str:
    """The first sentence: the failing call (or the test's check), the two values, the test's line.
    `shortened`: the runner cut both values (pytest's `{'email': 'ad...}`), the finding says the rest."""
    if zh:
        if call is None:
            if shortened:
                return f"{tw} 处测试检查的值与期望不同"
            return (
                f"{tw} 处测试检查的值中 {detail}"
                if detail
                else f"{tw} 处的测试得到 {got or '?'},而期望 {exp or '另一个值'}"
            )
        if shortened:
            return f"{call} 的返回值与 {tw} 处测试的期望不同"
        if detail:
            return f"{call} 的返回值中 {detail}({tw} 处的测试)"
        return f"{call} 返回了 {got or '?'},而 {tw} 处的测试期望 {exp or '另一个值'}"
    if call is None:
        if shortened:
            return f"The value the test checks at {tw} differs from the expected one"
        if detail:
            return f"In the value the test checks at {tw}, {detail}"
        return f"The test at {tw} got {got or '?'} where it expects {exp or 'a different value'}"
    if shortened:
        return f"{call} returned a value unlike the one the test at {tw} expects"
    if detail:
        return f"{call} returned a value whose {detail} (the test at {tw})"
    return f"{call} returned {got or '?'} where the test at {tw} expects {exp or 'a different value'}"


def _value_hint(
    failure: Failure, ev: _Evidence, sources: Sources | None, zh: bool, framework: str | None, rule_id: str
) -> str | None:
    js = framework in _JS_FRAMEWORKS
    node = framework == "node:test"
    message = failure.message[:_MAX_MESSAGE]
    call, where_value, counted = _pytest_call(message)
    counted = counted or rule_id == "collection-length"
    call = call or ev.call
    exp, got = failure.expected, failure.got
    if got is None and where_value is not None:
        got = where_value
    if exp is None or got is None:
        a = _ASSERT_LINE.search(message) or _NODE_PAIR.search(message)
        if a and "..." not in a.group(0):
            got, exp = got if got is not None else a.group("got"), exp if exp is not None else a.group("exp")
    words = " ".join(x for x in (call.text if call else "", failure.test) if x)
    from greenloop.hints import values as hint_values

    finding = hint_values.compare_texts(got, exp, words) or hint_values.diff_from_message(message, words)
    origin: str | None = _place(ev)
    definition: tuple[str, int] | None = None
    if origin is None and call is not None and sources is not None and ev.test_file:
        definition = sources.definition(ev.test_file, call)
        if definition is not None:
            origin = f"{call.name} ({definition[0]}:{definition[1]})"
    if finding is None and origin is None and call is None:
        return None
    if finding is None and not (exp or got):
        return None
    tw = ev.test_where or ("测试" if zh else "the test")
    # ("0x..." is an address a stored record masked, not a value the runner shortened)
    shortened = finding is not None and not finding.detail_en and "..." in f"{got}{exp}".replace("0x...", "")
    detail = (finding.detail_zh if zh else finding.detail_en) if finding is not None else ""
    g, e = _shown(got, node), _shown(exp, node)
    if counted and g and e:  # the values are counts of items, not what the call returned
        g, e = (f"{g} 个元素", f"{e} 个") if zh else (f"{g} item(s)", e)
    body = _body(call.text if call else None, tw, g, e, detail, shortened, zh)
    if js and detail:  # the finding's values are Python data: say them as the runner does
        body = _PY_WORDS.sub(lambda w: _TO_JS[w.group(1)], body)
    if origin:
        body += f";该值来自 {origin}" if zh else f"; it comes from {origin}"
    if finding is not None and finding.en:
        says = finding.zh if zh else finding.en
        returns = sources.returns(*definition) if definition and sources else None
        if finding.kind == "no-return" and returns is not None:
            none = "undefined" if js else "None"
            name = call.name if call else ("该函数" if zh else "it")
            if returns is False:
                says = (
                    f"{name} 里没有任何带值的 return,所以返回 {none}"
                    if zh
                    else f"it has no return statement with a value, so every call gives {none}"
                )
            else:  # it does return somewhere: this input takes a branch that does not, or returns None
                says = (
                    f"{name} 对这组输入走到了没有 return 的分支(或显式返回了 {none})"
                    if zh
                    else f"{name} returns a value elsewhere, so this input takes a branch without a return"
                    f" (or one that returns {none} on purpose)"
                )
        if js:
            says = _PY_WORDS.sub(lambda w: _TO_JS[w.group(1)], says)
        second = says
    elif origin:
        name = origin.split(" (", 1)[0]
        second = f"用这组输入逐步检查 {name}" if zh else f"Follow {name} with that input"
    else:
        second = "检查代码对这组输入如何计算该值" if zh else "Check how the code computes it for that input"
    if zh:
        return f"{body}。{second}。"
    return f"{body}. {second[0].upper()}{second[1:]}."


def hint_for(
    failure: Failure,
    *,
    framework: str | None = None,
    language: str = "en",
    sources: Sources | None = None,
) -> str:
    """One or two sentences naming the failing expression, the values, and the place in the
    user's code that produced them. `sources` (one per run) lets the hint read the workspace's
    files for the failing line and the called function's definition."""
    _check_language(language)
    ev = _evidence(failure, sources)
    rule, groups = _find(failure, ev)
    zh = language == "zh"
    fw = framework or ("pytest" if ".py" in (failure.file or failure.stack) else None)
    if rule.id in VALUE_RULES:
        composed = _value_hint(failure, ev, sources, zh, fw, rule.id)
        if composed is not None:
            return composed
    place = _place(ev)
    frames_where = top_user_frame(failure)
    where = place or (ev.test_where if ev.test_line else None) or frames_where
    test_where = ev.test_where or where
    stub = _STUBS.get(fw or "", _STUB_DEFAULT)[1 if zh else 0]
    expected, got = _short(failure.expected), _short(failure.got)
    head = failure.message[:_MAX_MESSAGE].strip()
    first = _short(head.splitlines()[0] if head else "")
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
        "code": _quote(ev.code_line) if place else "",
        "subscript": "",
        "defined": "",
        "suggest": "",
        "test_call": f" (`{ev.call.text}`)" if ev.call else "",
    }
    values.update({k: _short(v) for k, v in groups.items() if k not in ("expected", "got") or not values[k]})
    if rule.id == "py-key-error":
        values["subscript"] = _subscript(groups.get("key", ""), ev.code_line, zh)
    elif rule.id == "py-index-error" and ev.code_line and "[len(" in ev.code_line.replace(" ", ""):
        values["suggest"] = (
            ":下标等于 len() 已越过最后一个元素(差 1)"
            if zh
            else ": an index equal to len() is one past the last item (off by one)"
        )
    elif rule.id == "py-attribute" and groups.get("typ") == "dict":
        attr = groups.get("attr", "")
        values["suggest"] = (
            f":字典的值要用 ['{attr}'] 或 .get('{attr}') 读取"
            if zh
            else f"; a dict's entries are read with ['{attr}'] or .get('{attr}')"
        )
    elif rule.id == "did-not-raise" and ev.call is not None and sources is not None and ev.test_file:
        found = sources.definition(ev.test_file, ev.call)
        if found is not None:
            values["defined"] = f" {ev.call.name} ({found[0]}:{found[1]})"
    elif rule.id == "db-constraint":
        values.update(_db_parts(_fields(failure, rule.fields), ev, groups.get("constraint", ""), zh))
    return (rule.zh if zh else rule.en).format_map(values)


def _subscript(key: str, code_line: str | None, zh: bool) -> str:
    """` in `settings["timeout_ms"]`` (the lookup of `key` in the failing line), or the line."""
    if not code_line:
        return ""
    inner = re.escape(key.strip().strip("'\""))
    m = re.search(r"[\w.\])]+\[\s*['\"]?" + inner + r"['\"]?\s*\]", code_line)
    text = m.group(0) if m else code_line
    text = text if len(text) <= 70 else text[:69] + "…"
    return f"(`{text}`)" if zh else f" in `{text}`"


def apply(
    failures: Iterable[Failure],
    *,
    framework: str | None = None,
    language: str = "en",
    root: str | None = None,
) -> tuple[Failure, ...]:
    """Copies of `failures` whose empty hints are filled (a hint already written is kept).
    `root`: the folder the runner ran in, whose files the hints may read (once each)."""
    _check_language(language)
    from greenloop.hints.source import Sources

    sources = Sources(root) if root else None
    return tuple(
        f
        if f.hint.strip()
        else f._replace(hint=hint_for(f, framework=framework, language=language, sources=sources))
        for f in failures
    )
