"""The hint rows on HTTP status mismatches, and the reading of the (expected, got) status pair
they test: a runner's expected/got fields, or the pair its assertion message prints."""

from __future__ import annotations

import re

from greenloop.hints.rule import ALL_FIELDS, MAX_MESSAGE, Rule
from greenloop.model import Failure

__all__ = ["STATUS_RULES", "status_matches", "status_pair"]

STATUS_RULES: tuple[Rule, ...] = (
    Rule(
        "status-401-got-500",
        ALL_FIELDS,
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
        ALL_FIELDS,
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
        ALL_FIELDS,
        (),
        "A missing resource is answered 200; in the handler tested at {test_where}{test_call}, check the"
        " lookup's result and answer 404 when nothing was found instead of returning null or an empty body.",
        "不存在的资源不应返回 200;在 {test_where}{test_call} 所测的处理函数里判断查询结果,查不到就返回 404,"
        "而不是返回 null 或空内容。",
        status=("404", "200"),
    ),
    Rule(
        "status-4xx-got-500",
        ALL_FIELDS,
        (),
        "The handler throws where it should answer {expected}; find the unguarded access or call in"
        " the route tested at {test_where}{test_call} and turn that case into an explicit {expected} answer.",
        "处理函数在应返回 {expected} 的情况下抛了异常;在 {test_where}{test_call} 所测的路由里"
        "找到没有判断的访问或调用,把这种情况显式返回 {expected}。",
        status=("4xx", "500"),
    ),
    Rule(
        "status-2xx-got-500",
        ALL_FIELDS,
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
        ALL_FIELDS,
        (),
        "The request reached no route (404); compare the method and path used at {test_where}{test_call} with"
        " the routes the app registers (prefix such as /api, trailing slash, router not mounted).",
        "请求没有命中任何路由(404);对比 {test_where}{test_call} 用的方法和路径与应用注册的路由(/api 前缀、"
        "末尾斜杠、router 没挂载)。",
        status=("*", "404"),
    ),
    Rule(
        "status-4xx-got-2xx",
        ALL_FIELDS,
        (),
        "The request the test sends at {test_where}{test_call} should be refused with {expected} but is"
        " accepted; the check for this case (validation, auth or existence) is missing in the route.",
        "{test_where}{test_call} 发送的请求本应以 {expected} 拒绝却被接受了;路由里缺少这类情况的检查"
        "(参数校验、鉴权或存在性判断)。",
        status=("4xx", "2xx"),
    ),
    Rule(
        "status-2xx-got-4xx",
        ALL_FIELDS,
        (),
        "A request the test considers valid is refused with {got}; compare the body and headers"
        " sent at {test_where}{test_call} with what the route's validation or auth requires.",
        "测试认为合法的请求被以 {got} 拒绝;对比 {test_where}{test_call} 发送的请求体和请求头"
        "与路由的校验、鉴权要求。",
        status=("2xx", "4xx"),
    ),
    Rule(
        "status-other",
        ALL_FIELDS,
        (),
        "The route tested at {test_where}{test_call} answers {got} where {expected} is expected; find the"
        " branch that chooses the status for this input and check its condition.",
        "{test_where}{test_call} 所测的路由对该输入返回 {got},而期望是 "
        "{expected};找到为这种输入决定状态码的分支,检查其条件。",
        status=("*", "*"),
    ),
)


def status_pair(failure: Failure) -> tuple[int, int] | None:
    """(expected, got) HTTP status codes the failure compares, else None."""
    exp, got = (failure.expected or "").strip(), (failure.got or "").strip()
    if _STATUS.match(exp) and _STATUS.match(got):
        return int(exp), int(got)
    for pattern in _STATUS_PAIRS:
        m = pattern.search(failure.message[:MAX_MESSAGE])
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


def status_matches(status: tuple[str, str], pair: tuple[int, int]) -> bool:
    """Whether a row's (expected, got) condition holds for the pair read from the failure."""
    return _status_ok(status[0], pair[0]) and _status_ok(status[1], pair[1])


def _status_ok(want: str, code: int) -> bool:
    if want == "*":
        return True
    if want.endswith("xx"):
        return str(code)[0] == want[0]
    return str(code) == want
