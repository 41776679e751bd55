"""chainfence._node.urls.split answers as urllib.parse.urlsplit does (it splits the usual node URL without
importing urllib.parse: issue #19), on URLs written by hand and generated: every component, the host
name, the port (or the ValueError reading it raises), the user name and the password."""

from __future__ import annotations

import string
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainfence._node.urls import _Split, split


def read(parts) -> dict[str, object]:
    seen: dict[str, object] = {}
    for name in ("scheme", "netloc", "path", "query", "fragment", "hostname", "port", "username", "password"):
        try:
            seen[name] = getattr(parts, name)
        except ValueError as error:
            seen[name] = ("ValueError", str(error))
    return seen


def same(url: str) -> None:
    try:
        expected = read(urlsplit(url))
    except ValueError as error:
        with pytest.raises(ValueError) as raised:
            read(split(url))
        assert str(raised.value) == str(error)
        return
    assert read(split(url)) == expected, url


HAND = [
    "http://127.0.0.1:8545",
    "http://127.0.0.1:8545/",
    "https://eth-mainnet.example.com/v2/KEY?x=1#frag",
    "HTTP://Example.COM:80/Path",
    "http://user:pass@host:1/p",
    "http://user@host",
    "http://@host",
    "http://user:@host",
    "http://a@b@host:5",
    "http://host:",
    "http://host:0",
    "http://host:65535",
    "http://host:65536",
    "http://host:-1",
    "http://host:8a",
    "http://host:８",
    "http://host%eth0:1",
    "http://HOST%ETH0:1",
    "http://host/a,b?c=d,e",
    "http://a,b:1,http://c:2",
    "http://host#frag?not-query",
    "http://host?q#f?g",
    "http:///path",
    "http://",
    "http:",
    "ht+tp.x-y://host",
    "1http://host",
    "ht_tp://host",
    "http://[::1]:8545",
    "http://[::1",
    "http://host]",
    "http://h ost",
    "http://host\t/x",
    "  http://host",
    "http://hóst",
    "/tmp/anvil.ipc",
    "",
]


@pytest.mark.parametrize("url", HAND)
def test_hand_written_urls_split_as_urlsplit_splits_them(url):
    same(url)


def test_the_usual_url_is_split_without_urllib():
    assert isinstance(split("http://127.0.0.1:8545"), _Split)
    assert not isinstance(split("http://[::1]:8545"), _Split)


PIECES = st.sampled_from(
    ["http", "https", "HTTP", "h", "x+y", "://", ":", "//", "/", "?", "#", "@", "%", "[", "]", ".", ",", "-", "_"]
)
TEXT = st.text(alphabet=string.ascii_letters + string.digits + ":/?#@%[].,-_ \t\x7f", max_size=12)


@given(st.lists(st.one_of(PIECES, TEXT), max_size=10))
def test_generated_urls_split_as_urlsplit_splits_them(pieces):
    same("".join(pieces))


@given(
    scheme=st.sampled_from(["http", "https", "HTTPS"]),
    user=st.one_of(st.none(), st.text(alphabet=string.ascii_letters + ":%", max_size=6)),
    host=st.text(alphabet=string.ascii_letters + string.digits + ".-_%", max_size=12),
    port=st.one_of(st.none(), st.integers(-5, 70_000).map(str), st.text(alphabet="0123456789a", max_size=6)),
    rest=st.text(alphabet=string.ascii_letters + "/?#=&,:@", max_size=12),
)
def test_generated_node_urls_split_as_urlsplit_splits_them(scheme, user, host, port, rest):
    netloc = (f"{user}@" if user is not None else "") + host + (f":{port}" if port is not None else "")
    same(f"{scheme}://{netloc}{rest}")
