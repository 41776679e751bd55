"""A node's URL split as :func:`urllib.parse.urlsplit` splits it, mostly without importing urllib.parse.

``urllib.parse`` imports ``ipaddress`` (to check a host in brackets) and builds its result classes when
imported: 3-5% of the instructions of a per-task ``chainfence`` command, which splits one URL (issue
#19, docs/benchmarks/history.md, "Instructions per command"). :func:`split` splits the usual URL itself: printable ASCII, no whitespace,
no bracket, a scheme and ``//``; any other goes to ``urlsplit``. What it returns reads as urlsplit's
result does (``scheme``, ``netloc``, ``path``, ``query``, ``fragment``, ``hostname``, ``port``,
``username``, ``password``), a malformed port raising ``ValueError`` when read, as there.
``tests/unit/test_urls.py`` holds the two to the same answers, on URLs written by hand and generated.
"""

from __future__ import annotations

from typing import Any

__all__ = ["split"]

#: What urlsplit accepts in a scheme (urllib.parse.scheme_chars).
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")


def split(url: str) -> Any:
    """``urllib.parse.urlsplit(url)``, or what reads the same (see the module docstring)."""
    colon = url.find(":")
    if (
        colon > 0
        and url.isascii()
        and url.isprintable()
        and " " not in url
        and "[" not in url
        and "]" not in url
        and url[0].isalpha()
        and url[colon + 1 : colon + 3] == "//"
        and all(char in _SCHEME_CHARS for char in url[:colon])
    ):
        return _Split(url, colon)
    from urllib.parse import urlsplit

    return urlsplit(url)


class _Split:
    """An ASCII URL with a scheme and ``//``, no bracket, split as urlsplit splits it."""

    __slots__ = ("fragment", "netloc", "path", "query", "scheme")

    def __init__(self, url: str, colon: int):
        self.scheme = url[:colon].lower()
        rest = url[colon + 3 :]
        end = len(rest)
        for delimiter in "/?#":
            found = rest.find(delimiter)
            if found >= 0:
                end = min(end, found)
        self.netloc, rest = rest[:end], rest[end:]
        self.fragment = self.query = ""
        if "#" in rest:
            rest, self.fragment = rest.split("#", 1)
        if "?" in rest:
            rest, self.query = rest.split("?", 1)
        self.path = rest

    @property
    def username(self) -> str | None:
        userinfo, at, _ = self.netloc.rpartition("@")
        return userinfo.partition(":")[0] if at else None

    @property
    def password(self) -> str | None:
        userinfo, at, _ = self.netloc.rpartition("@")
        if not at:
            return None
        _, colon, password = userinfo.partition(":")
        return password if colon else None

    @property
    def hostname(self) -> str | None:
        hostname = self.netloc.rpartition("@")[2].partition(":")[0]
        if not hostname:
            return None
        name, percent, zone = hostname.partition("%")
        return name.lower() + percent + zone

    @property
    def port(self) -> int | None:
        port = self.netloc.rpartition("@")[2].partition(":")[2]
        if not port:
            return None
        if not (port.isdigit() and port.isascii()):
            raise ValueError(f"Port could not be cast to integer value as {port!r}")
        number = int(port)
        if not 0 <= number <= 65535:
            raise ValueError("Port out of range 0-65535")
        return number
