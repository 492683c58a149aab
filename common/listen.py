"""Listen addresses: `host:port`, `[v6]:port` or `:port` (every interface), as Go's net.SplitHostPort.

One parser for every server infscale starts (adapter, controller, emulator, load gate), so an address
one accepts the others accept too. `:8080` means every interface, as in Go and Prometheus
(`--web.listen-address=:9090`); an IPv6 host needs brackets (`::1:8080` is ambiguous, Go refuses it).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator

EXAMPLES = "e.g. 0.0.0.0:8080, :8080, [::]:8080 or localhost:8080"


def parse_listen(value: str) -> tuple[str, int]:
    """(host, port); host "" means every interface. ValueError naming the value otherwise."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        raise ValueError(f"listen address {value!r} must be host:port ({EXAMPLES})")
    if not port_text.isascii() or not port_text.isdigit():
        raise ValueError(f"listen address {value!r}: port {port_text!r} is not a number ({EXAMPLES})")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"listen address {value!r}: port {port} is outside 0..65535")
    if host.startswith("[") and host.endswith("]"):
        inner = host[1:-1]
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            raise ValueError(f"listen address {value!r}: {inner!r} is not an IPv6 address") from None
        return inner, port
    if ":" in host or "[" in host or "]" in host:
        raise ValueError(f"listen address {value!r}: an IPv6 host needs brackets, e.g. [::1]:{port}")
    if any(c.isspace() for c in host):
        raise ValueError(f"listen address {value!r}: the host contains blanks")
    return host, port


def bind_host(host: str) -> str | None:
    """What aiohttp's TCPSite takes: None (every interface) for the empty host."""
    return host or None


def _checked(value: str) -> str:
    parse_listen(value)  # ValueError naming the value
    return value


# A settings field holding a listen address, checked when the settings are read.
ListenAddress = Annotated[str, AfterValidator(_checked)]
