"""One listen-address parser for every server: Go's net.SplitHostPort reading, with the value named."""

from __future__ import annotations

import re

import pytest
from pydantic import BaseModel, ValidationError

from common.listen import ListenAddress, bind_host, parse_listen


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("0.0.0.0:6443", ("0.0.0.0", 6443), id="v4"),
        pytest.param("[::]:6443", ("::", 6443), id="v6 in brackets"),
        pytest.param("[fe80::1%eth0]:80", ("fe80::1%eth0", 80), id="v6 with a zone"),
        pytest.param("localhost:0", ("localhost", 0), id="ephemeral port"),
        pytest.param(":8080", ("", 8080), id="empty host: every interface, as in Go"),
        pytest.param("127.0.0.1:65535", ("127.0.0.1", 65535), id="highest port"),
    ],
)
def test_accepted(value: str, expected: tuple[str, int]) -> None:
    assert parse_listen(value) == expected


@pytest.mark.parametrize(
    ("value", "error"),
    [
        pytest.param("8080", "must be host:port", id="no colon"),
        pytest.param("h:port", "port 'port' is not a number", id="named port"),
        pytest.param("h:70000", "port 70000 is outside 0..65535", id="port too large"),
        pytest.param("h:", "port '' is not a number", id="no port"),
        pytest.param("::1:8080", "an IPv6 host needs brackets", id="bare v6 is ambiguous"),
        pytest.param("[nothex]:80", "'nothex' is not an IPv6 address", id="brackets around a name"),
        pytest.param("a b:80", "the host contains blanks", id="blank in host"),
        pytest.param("h:٣", "is not a number", id="non-ASCII digit"),
    ],
)
def test_refused_naming_the_value(value: str, error: str) -> None:
    with pytest.raises(ValueError, match=f"listen address {re.escape(repr(value))}.*{re.escape(error)}"):
        parse_listen(value)


def test_empty_host_binds_every_interface() -> None:
    assert bind_host("") is None
    assert bind_host("127.0.0.1") == "127.0.0.1"


def test_listen_address_field_checks_the_value_and_keeps_the_text() -> None:
    class Settings(BaseModel):
        listen: ListenAddress = ":8080"

    assert Settings(listen="[::1]:9090").listen == "[::1]:9090"
    with pytest.raises(ValidationError) as caught:
        Settings(listen="::1:8080")
    (error,) = caught.value.errors()
    assert error["loc"] == ("listen",)
    assert "an IPv6 host needs brackets" in error["msg"]
