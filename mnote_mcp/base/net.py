"""Which addresses are this machine's own: the one rule every listener applies before binding."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """`localhost`, or an IPv4/IPv6 loopback address (`[::1]` with or without brackets)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
