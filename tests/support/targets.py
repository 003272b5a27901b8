"""Name resolution from a table, for target policies that ask no DNS."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable


def fake_resolver(table: dict[str, list[str]]) -> Callable[[str], list[ipaddress.IPv4Address | ipaddress.IPv6Address]]:
    def resolve(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
        try:
            return [ipaddress.ip_address(host)]
        except ValueError:
            return [ipaddress.ip_address(a) for a in table[host]]
    return resolve


RESOLVER = fake_resolver({"agents.example.com": ["203.0.113.7"], "evil.example.net": ["169.254.169.254"],
                          "inside.corp": ["10.1.2.3"], "localhost": ["127.0.0.1", "::1"]})
