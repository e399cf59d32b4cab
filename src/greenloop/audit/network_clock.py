"""The audit's no_network_or_clock check: no test reaches a real host, or reads the clock or
randomness, without stubbing it.
"""

from __future__ import annotations

import re

from greenloop.audit.check import Check, nothing_found
from greenloop.audit.sources import Unit, line_of

__all__ = [
    "check",
]

_EXTERNAL_URL = re.compile(
    r"(['\"`])(?:https?|wss?)://(?!localhost(?![\w.-])|127\.\d+\.\d+\.\d+|\[::1\]|0\.0\.0\.0)"
    r"(?P<host>[A-Za-z0-9.-]+)"
)
_NET_STUB = {
    "js": re.compile(
        r"(?:vi|jest)\.(?:spyOn|stubGlobal)\s*\([^)]*fetch|(?:vi|jest)\.mock\(\s*['\"`]"
        r"(?:axios|node-fetch|got|undici|cross-fetch|superagent)|\bnock\b|\bmsw\b|setupServer"
        r"|global(?:This)?\.fetch\s*=|mock\.method\([^)]*fetch"
    ),
    "py": re.compile(
        r"\bresponses\b|respx|requests_mock|httpretty|pytest_httpserver|aioresponses"
        r"|(?:monkeypatch\.setattr|patch(?:\.object)?)\s*\([^)]*(?:requests|httpx|urlopen|socket|urllib)"
    ),
}
_CLOCK_USE = {
    "js": re.compile(
        r"\bDate\.now\s*\(|\bnew Date\s*\(\s*\)|\bMath\.random\s*\(|\bperformance\.now\s*\("
        r"|\bcrypto\.randomUUID\s*\(|setTimeout\s*\([^;]*?,\s*(?:[1-9]\d{2,})\s*\)"
    ),
    "py": re.compile(
        r"\btime\.(?:time|monotonic|perf_counter|sleep)\s*\(|\bdatetime(?:\.datetime)?\.(?:now|utcnow|today)\s*\("
        r"|\bdate\.today\s*\(|\brandom\.(?!seed\b)\w+\s*\(|\buuid\.uuid[14]\s*\("
    ),
}
_CLOCK_STUB = {
    "js": re.compile(
        r"(?:vi|jest)\.useFakeTimers|(?:vi|jest)\.setSystemTime|(?:vi|jest)\.spyOn\(\s*"
        r"(?:Math|Date|global(?:This)?\.Date|crypto|performance)\b|mock\.timers|vi\.stubGlobal\(\s*['\"`]"
        r"(?:Date|Math|crypto)|(?:vi|jest)\.mock\(\s*['\"`](?:uuid|nanoid)"
    ),
    "py": re.compile(
        r"freezegun|freeze_time|time_machine|random\.seed\s*\(|Random\(\s*\d"
        r"|(?:monkeypatch\.setattr|patch(?:\.object)?)\s*\([^)]*(?:time|datetime|random|uuid)"
    ),
}


def check(unit: Unit) -> Check:
    """The no_network_or_clock verdict: each unstubbed real host, clock or randomness use, and the fix."""
    found: list[str] = []
    for src in unit.sources:
        lang = src.language
        if not _NET_STUB[lang].search(src.code):
            for m in _EXTERNAL_URL.finditer(src.code):
                line = line_of(src.code, m.start())
                found.append(
                    f"{src.file}:{line}: reaches the real host {m.group('host')} (network not stubbed)"
                )
        if not _CLOCK_STUB[lang].search(src.code):
            for m in _CLOCK_USE[lang].finditer(src.code):
                line = line_of(src.code, m.start())
                snippet = " ".join(m.group(0).split())
                found.append(
                    f"{src.file}:{line}: {snippet}… depends on the clock or randomness without a stub"
                )
    return nothing_found(
        "no_network_or_clock",
        f"{len(found)} unstubbed network, clock or randomness use(s)",
        found,
        "fix: stub the network (vi.spyOn(globalThis, 'fetch'), nock, responses, monkeypatch) and the "
        "clock or randomness (vi.useFakeTimers, vi.spyOn(Math, 'random'), freezegun, random.seed)",
    )
