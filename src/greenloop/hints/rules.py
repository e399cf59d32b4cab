"""The hint table: which failures each cause explains, and the sentence that names it.

Each row (hints/rule.py) lists the fields of the failure it reads, the regular expressions that
must all match there, and a message template in English and Chinese. The first row that
matches wins (hints/matching.py); the last one always matches and still names the test, what
it expected and the top frame in the user's code. The rows on HTTP status mismatches live in
hints/status.py with the reading of the status pair they test.

Templates may use: {test} (the test's name), {where} (the place in the user's code as
`function (file:line)`, else the test's file:line), {test_where} (the test's own file:line),
{code} (` (`the source line`)` at {where}, or empty), {expected}, {got} (shortened), {stub}
(how to stub a dependency in this framework), {diff} (the first differing key of a deep
comparison, if one can be read), the db_* parts of a constraint failure, {subscript} (the
lookup that raised a KeyError), {suggest} (what the evidence shows, as a clause or empty), and
{stall} (what keeps a test of this language from finishing), and the named groups of the
rule's patterns. Assertion failures whose values can be read
(VALUE_RULES) get the composed value hint (hints/assertion.py) instead of their template.
"""

from __future__ import annotations

from greenloop.hints.rule import ALL_FIELDS, MESSAGE, MESSAGE_AND_STACK, Rule
from greenloop.hints.status import STATUS_RULES

__all__ = ["RULES", "VALUE_RULES"]

_PROPERTY_OF_NOTHING = (
    "In {where} the code reads '{prop}' from a value that is {what}{code}; check that the object"
    " (often a request body field or a lookup result) exists before using it.",
    "{where} 处从一个 {what} 的值上读取 '{prop}'{code};"
    "使用前先判断该对象(常见是请求体字段或查询结果)是否存在。",
)

RULES: tuple[Rule, ...] = (
    # --- the runner refused the run itself (its own rule, not the code under test)
    Rule(
        "vitest-only-refused",
        MESSAGE,
        (r"Unexpected \.only modifier",),
        "vitest refused the .only at {where} because CI is set in the tests' environment (under CI"
        " vitest allows no .only); the code under test was not run. Remove the .only so the whole"
        " file runs, or unset CI if narrowing is meant.",
        "{where} 处的 .only 被 vitest 拒绝:测试环境里设置了 CI(CI 下 vitest 不允许 .only),"
        "被测代码没有运行。删掉 .only 让整个文件都跑,或在确实要缩小范围时取消 CI。",
        words=("unexpected .only modifier",),
    ),
    # --- the suite could not load the code under test
    Rule(
        "js-module-not-found",
        MESSAGE,
        (r"Cannot find module '(?P<module>[^']+)'|Failed to load url (?P<url>\S+)|ERR_MODULE_NOT_FOUND",),
        "The import of '{module}{url}' at {where} fails, so none of the tests in {test} ran; check"
        " that the path and file name under code/ match the import and that the module exports it.",
        "{where} 处导入 '{module}{url}' 失败,{test} 里的测试一个都没跑;核对导入路径、文件名"
        "与 code/ 下实际文件一致,并确认该模块已导出。",
        words=("cannot find module", "failed to load url", "err_module_not_found"),
    ),
    Rule(
        "py-module-not-found",
        MESSAGE,
        (r"ModuleNotFoundError: No module named '(?P<module>[^']+)'",),
        "Python cannot find the module '{module}' imported by {test} ({where}); check the module's"
        " file name and that its folder is on sys.path (conftest.py or the package layout).",
        "Python 找不到 {test} 导入的模块 '{module}'({where});核对模块文件名,并确认其目录在"
        " sys.path 上(conftest.py 或包结构)。",
    ),
    Rule(
        "py-import-name",
        MESSAGE,
        (r"ImportError: cannot import name '(?P<name>[^']+)' from '(?P<module>[^']+)'",),
        "The module '{module}' has no '{name}' that {test} imports ({where}); the function was"
        " renamed, not written yet, or is defined under another name in the code.",
        "模块 '{module}' 里没有 {test} 要导入的 '{name}'({where});该函数可能被改名、还没写,"
        "或在代码里用了别的名字。",
    ),
    Rule(
        "syntax-error",
        MESSAGE,
        # (Python's IndentationError and TabError are SyntaxErrors too)
        (r"(?:SyntaxError|IndentationError|TabError):? (?P<detail>[^\n]{0,80})",),
        "The code does not parse ({detail}) at {where}, so the suite could not load; fix the"
        " syntax there before reading any test result.",
        "代码在 {where} 无法解析({detail}),整个测试套件没能加载;先修好那里的语法再看测试结果。",
        words=("syntaxerror", "indentationerror", "taberror"),
    ),
    Rule(
        "fixture-not-found",
        MESSAGE,
        (r"fixture '(?P<name>[^']+)' not found",),
        "{test} asks for a pytest fixture '{name}' that no conftest.py or plugin defines; define"
        " it in tests/conftest.py or fix the argument name at {test_where}.",
        "{test} 请求的 pytest fixture '{name}' 没有任何 conftest.py 或插件定义;在"
        " tests/conftest.py 里定义它,或改正 {test_where} 处的参数名。",
    ),
    # --- the seed's patterns (auth, database, timeouts)
    Rule(
        "bcrypt-null-user",
        MESSAGE_AND_STACK,
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
        MESSAGE_AND_STACK,
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
        MESSAGE_AND_STACK,
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
    Rule(  # Python 3.11's asyncio.wait_for: the cancelled wait surfaces as CancelledError, then TimeoutError
        "py-async-timeout",
        MESSAGE,
        (
            r"\A\s*(?:asyncio\.)?(?:exceptions\.)?(?:CancelledError|TimeoutError)\b",
            r"CancelledError[\s\S]*TimeoutError",
        ),
        "{test} ran out of time in an asyncio wait ({where}{code}): asyncio.wait_for (or"
        " asyncio.timeout) cancelled the awaited call when its timeout passed, which Python 3.11"
        " reports as CancelledError and then TimeoutError; find what that call waits on (a lock, a"
        " queue, a real network call) and stub it with {stub}, or give it the time it needs.",
        "{test} 在 asyncio 等待中超时({where}{code}):asyncio.wait_for(或 asyncio.timeout)"
        "在超时后取消了被等待的调用,Python 3.11 把它报告为 CancelledError 再加 TimeoutError;"
        "找出该调用在等什么(锁、队列、真实网络调用)并用 {stub} stub 掉,或给它足够的时间。",
        words=("cancellederror",),
    ),
    Rule(
        "timeout",
        MESSAGE,
        # the runners' own timeout words only: a key or variable named "timeout" in another
        # error (KeyError: 'timeout_ms') is not a test that never finished
        (
            r"\A(?!\s*(?:\w+\.)*(?:KeyError|AttributeError|NameError|TypeError|ValueError|IndexError)\b)"
            r"(?:.*?)(?:\btimed out\b|Exceeded timeout|STACK_TRACE_ERROR|Timeout \(>[\d.]+s\)"
            r"|Test timeout of|async callback was not invoked|Timeout of [\d.]+ ?ms exceeded"
            r"|\ATimeoutError\b)",  # bun's JUnit report: "TimeoutError: " (its text says "timed out")
        ),
        "{test} never finished ({where}): look for {stall}, or a real dependency (network, timer)"
        " that should be stubbed with {stub}.",
        "{test} 没有结束({where}):检查是否{stall},或外部依赖(网络、定时器)没有用 {stub} stub。",
        words=(
            "timed out",
            "exceeded timeout",
            "stack_trace_error",
            "timeout (",
            "test timeout of",
            "async callback",
            "ms exceeded",  # mocha: "Timeout of 2000ms exceeded"
            "timeouterror",
        ),
    ),
    *STATUS_RULES,
    # --- null / undefined / missing keys and names
    Rule(
        "js-property-of-undefined",
        MESSAGE,
        (r"Cannot read propert(?:y|ies) of (?P<what>undefined|null)(?: \(reading '(?P<prop>[^']+)'\))?",),
        *_PROPERTY_OF_NOTHING,
        words=("cannot read propert",),
    ),
    Rule(  # the same mistake in JavaScriptCore's words (bun): "null is not an object (evaluating 'o.x')"
        "jsc-property-of-undefined",
        MESSAGE,
        (r"(?P<what>undefined|null) is not an object \(evaluating '(?:[^']*\.)?(?P<prop>[^'.]+)'\)",),
        *_PROPERTY_OF_NOTHING,
        words=("is not an object",),
    ),
    Rule(
        "py-none-attribute",
        MESSAGE,
        (r"'NoneType' object has no attribute '(?P<prop>[^']+)'",),
        "In {where} the code reads .{prop} of None{code}; the lookup or call that gave that value"
        " returned None (not found, or a missing return), so handle that case first.",
        "{where} 处在 None 上访问 .{prop}{code};给出该值的查询或调用返回了 None(没查到或漏了 return),"
        "先处理这种情况。",
    ),
    Rule(
        "data-race",
        MESSAGE,
        (r"\Adata race\b|WARNING: DATA RACE|race detected during execution of test",),
        "Two goroutines touch the same memory without synchronisation ({where}): guard it with a"
        " sync.Mutex, use sync/atomic, or hand the value over a channel; the race report in the"
        " stack names both accesses.",
        "两个 goroutine 未加同步地访问同一块内存({where}):用 sync.Mutex 保护、改用 sync/atomic,"
        "或通过 channel 传递该值;堆栈中的竞态报告列出了两次访问。",
        words=("data race", "race detected"),
    ),
    Rule(
        "rust-unwrap",
        MESSAGE,
        (r"called `(?P<typ>Option|Result)::(?P<how>unwrap|expect)\(\)` on an? `(?P<what>None|Err)` value",),
        "In {where} the code calls {how}() on {what}{code}: the value it relied on is missing (a"
        " lookup that found nothing, a parse or call that failed); handle the {what} case or find"
        " why it is there.",
        "{where} 处对 {what} 调用了 {how}(){code}:它依赖的值不存在(查询没找到、解析或调用失败);"
        "处理 {what} 的情况,或找出它为何出现。",
        words=("::unwrap()", "::expect()"),
    ),
    Rule(
        "py-attribute",
        MESSAGE,
        (r"AttributeError: '(?P<typ>\w+)' object has no attribute '(?P<attr>\w+)'",),
        "{where} reads .{attr} of a {typ}{code}, which has no such attribute{suggest}.",
        "{where} 读取 {typ} 的 .{attr}{code},但它没有这个属性{suggest}。",
    ),
    Rule(
        "py-key-error",
        MESSAGE,
        (r"KeyError: (?P<key>[^\n]{1,60})",),
        "{where} looks up the key {key}{subscript}, which that dict does not have; compare the key's"
        " spelling with where the dict is built (or use .get() if the key is optional).",
        "{where} 用键 {key} 取值{subscript},但该字典没有这个键;对照构建该字典的代码核对键名"
        "(若该键可有可无,改用 .get())。",
    ),
    Rule(
        "py-index-error",
        MESSAGE,
        (r"IndexError: (?P<detail>[^\n]{1,80})",),
        "{where} indexes past the end of a sequence ({detail}){code}{suggest}.",
        "{where} 的下标越界({detail}){code}{suggest}。",
    ),
    Rule(
        "py-operand-types",
        MESSAGE,
        (r"TypeError: unsupported operand type\(s\) for (?P<op>\S+): '(?P<left>\w+)' and '(?P<right>\w+)'",),
        "{where} applies {op} to {left} and {right}{code}; one operand has the wrong type, so"
        " convert it where it is read (int(), float() or str()).",
        "{where} 对 {left} 和 {right} 做 {op} 运算{code};其中一个操作数类型不对,在读入它的地方转换"
        "(int()、float() 或 str())。",
    ),
    Rule(
        "py-argument-count",
        MESSAGE,
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
        MESSAGE,
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
        MESSAGE,
        (r"(?:ReferenceError: |NameError: name ')(?P<name>[\w$]{1,80})'? is not defined",),
        "'{name}' is used at {where} but never declared or imported there; import it or define it"
        " in that scope.",
        "{where} 处使用了 '{name}',但那里从未声明或导入;导入它或在该作用域中定义。",
        words=("is not defined",),
    ),
    Rule(
        "raised-in-code",
        MESSAGE,
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
    Rule(  # Go's `panic: runtime error: …` and Rust's `panicked at`, raised in the code under test
        "panic-in-code",
        MESSAGE_AND_STACK,
        (r"(?:\A|\n)\s*panic: (?P<detail>[^\n]{1,120})|panicked at [^\n]*?:\n?(?P<rdetail>[^\n]{1,120})",),
        "{where} panics ('{detail}{rdetail}'){code}, for the input the test gives at {test_where}{test_call};"
        " compare that input with what the code indexes, unwraps or divides by there.",
        "{where} 发生 panic('{detail}{rdetail}'){code},输入来自测试 {test_where}{test_call};"
        "对照这组输入检查那里的下标、unwrap 或除数。",
        needs_code_frame=True,
        words=("panic",),
    ),
    # --- assertion shapes
    Rule(
        "unexpected-success",
        MESSAGE,
        # unittest's expectedFailure, pytest's strict xfail, bun's test.failing
        (r"unexpected success|\[XPASS\(strict\)\]|marked as failing but it passed",),
        "{test} is marked as a failure to expect but passed ({test_where}): what it documented is"
        " fixed, so remove the expectedFailure / xfail / .failing mark; if it should still fail, find what"
        " changed.",
        "{test} 被标记为预期失败却通过了({test_where}):它记录的问题已修复,"
        "去掉 expectedFailure / xfail / .failing 标记;若它本应仍然失败,找出是什么改变了。",
        words=("unexpected success", "xpass", "marked as failing"),
    ),
    Rule(
        "snapshot-mismatch",
        MESSAGE,
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
        MESSAGE,
        (
            r"DID NOT RAISE|instead of rejecting|did not throw|Missing expected (?:exception|rejection)"
            r"|Expected the function to throw|expected \[Function[^\]]*\] to throw"
            r"|did not panic as expected",  # a Rust #[should_panic] test
        ),
        "{test} expects an error for this input{test_call} but the code accepts it ({test_where});"
        " the validation that should raise or reject is missing in the function under test{defined}.",
        "{test} 期望该输入{test_call}报错,但代码接受了它({test_where});"
        "被测函数{defined}里缺少应当抛出或拒绝的校验。",
        words=("did not", "instead of rejecting", "missing expected", "to throw"),
    ),
    Rule(
        "collection-length",
        MESSAGE,
        (r"to have a length of|toHaveLength|Expected length",),
        "The collection has {got} item(s) where {test} expects {expected}; check the filter or"
        " query that builds it and the data the test prepared ({test_where}).",
        "集合里有 {got} 个元素,而 {test} 期望 {expected} 个;"
        "检查构造它的过滤条件或查询,以及测试准备的数据({test_where})。",
    ),
    Rule(
        "collection-items",
        MESSAGE,
        (r"(?P<side>Right|Left) contains (?P<detail>[^\n]+)",),
        "The list returned to {test} does not hold the expected items ({side} side contains {detail});"
        " check the filter or query that builds it and the data the test prepared ({test_where}).",
        "返回给 {test} 的列表元素与期望不符({side} 侧包含 {detail});检查构造它的过滤条件或查询,"
        "以及测试准备的数据({test_where})。",
    ),
    Rule(
        "deep-equal",
        MESSAGE,
        (r"deeply equal|deep[- ]equal|toEqual|toStrictEqual|Differing items|Full diff|\+ actual - expected",),
        "The object returned to {test} differs from the expected one{diff}; check how the code"
        " builds that value (defaults, field names, types) for the input used at {test_where}.",
        "返回给 {test} 的对象与期望不同{diff};检查代码在 "
        "{test_where} 这组输入下如何构造该值(默认值、字段名、类型)。",
    ),
    Rule(
        "returned-value",
        MESSAGE,
        (r"(?:^|\n)[\s+]*where (?P<value>[^\n]+?) = (?P<call>[\w.]+)\((?P<args>[^\n]{0,80})\)\s*(?:\n|$)",),
        "{call}({args}) returned {value} where {test} expects {wanted}; the computation inside"
        " {call} is the likely culprit: follow it with that input ({test_where}).",
        "{call}({args}) 返回了 {value},而 {test} 期望 {wanted};问题很可能出在 {call} 内部的计算:"
        "用这组输入逐步检查它({test_where})。",
    ),
    Rule(
        "zero-division",
        MESSAGE,
        (r"ZeroDivisionError|division by zero",),
        "The code divides by zero in {where}{code}, which happens for empty input; guard the empty"
        " case (return 0 or refuse the input) before dividing.",
        "{where} 处除以零{code},通常出现在输入为空时;除法前先处理空输入(返回 0 或拒绝该输入)。",
    ),
    Rule(
        "unhandled-rejection",
        MESSAGE,
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
        ALL_FIELDS,
        (),
        "{test} failed: it expects {expectation}; start at {where}, where the failure is raised,"
        " and check the values the code passes along just before it.",
        "{test} 失败:期望 {expectation};从抛出失败的 {where} 看起,检查其前一步代码传入的值。",
    ),
)


# Assertion failures: when their values can be read, the composed value hint replaces the template.
VALUE_RULES = frozenset({"deep-equal", "returned-value", "fallback", "collection-length", "collection-items"})
