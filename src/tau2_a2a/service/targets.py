"""Which agent endpoints the evaluation service may call.

The service makes HTTP requests to URLs its callers choose, so it refuses
link-local and cloud-metadata addresses always, and, when an allow-list is
configured, anything outside it. The check resolves the host name and looks
at every address it resolves to. (A host whose DNS answer changes between
this check and the evaluation's own connection is not caught: pin targets
with an allow-list of networks when that matters.)
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlparse

from tau2_a2a.config import ConfigError, validate_endpoint

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

ALWAYS_REFUSED_NETWORKS: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("100.100.100.200/32"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)
ALWAYS_REFUSED_HOSTS = frozenset({"metadata.google.internal", "metadata.google.internal."})

Resolver = Callable[[str], list[IPAddress]]


class TargetRefused(ConfigError):
    """The target endpoint is not allowed by the service's target policy."""


def resolve(host: str) -> list[IPAddress]:
    """Every address `host` resolves to (an IP literal resolves to itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as error:
        raise TargetRefused(
            f"agent_endpoint host {host!r} cannot be resolved ({error.strerror}). "
            "Check the URL, or use an IP address."
        ) from None
    return sorted({ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos}, key=str)


def _plain(address: IPAddress) -> IPAddress:
    """An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is checked as the IPv4 address."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True)
class TargetPolicy:
    """An optional allow-list of hosts and networks; some addresses are always refused.

    Entries are host names (`agents.example.com`), wildcard domains
    (`*.example.com`), IP addresses or networks in CIDR form (`10.0.0.0/8`).
    With no entries every target is allowed except the always-refused ones.
    """

    hosts: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()
    resolver: Resolver = field(default=resolve, compare=False, repr=False)

    @classmethod
    def from_entries(cls, entries: Iterable[str], resolver: Resolver = resolve) -> TargetPolicy:
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if not all(c.isalnum() or c in "-.*" for c in entry):
                    raise ConfigError(
                        f"Allowed target {raw!r} is neither a host name, a *.domain wildcard, "
                        "an IP address nor a CIDR network (e.g. 10.0.0.0/8)."
                    ) from None
                hosts.add(entry.rstrip("."))
        return cls(hosts=frozenset(hosts), networks=tuple(networks), resolver=resolver)

    @property
    def restricted(self) -> bool:
        return bool(self.hosts or self.networks)

    def describe(self) -> str:
        if not self.restricted:
            return "any host except link-local and cloud-metadata addresses"
        return ", ".join(sorted(self.hosts) + [str(n) for n in self.networks])

    def check(self, endpoint: str) -> str:
        """The endpoint, normalised, if the policy allows it; else TargetRefused saying why."""
        try:
            endpoint = validate_endpoint(endpoint)
        except ConfigError:
            raise ConfigError(
                f"agent_endpoint {endpoint!r} is not an http(s) URL. "
                "Pass the A2A agent's base URL, for example http://127.0.0.1:9000"
            ) from None
        host = (urlparse(endpoint).hostname or "").lower()
        if host.rstrip(".") in {h.rstrip(".") for h in ALWAYS_REFUSED_HOSTS}:
            raise TargetRefused(f"agent_endpoint {endpoint!r} is refused: {host} is a cloud metadata service.")
        addresses = [_plain(a) for a in self.resolver(host)]
        for address in addresses:
            for network in ALWAYS_REFUSED_NETWORKS:
                if address.version == network.version and address in network:
                    raise TargetRefused(
                        f"agent_endpoint {endpoint!r} is refused: {host} resolves to {address}, "
                        f"in {network} (link-local or cloud metadata addresses are never allowed)."
                    )
        if self.restricted and not self._allowed(host, addresses):
            raise TargetRefused(
                f"agent_endpoint {endpoint!r} is refused: {host} is not in this service's allowed "
                f"targets ({self.describe()}). Ask the operator to add it (--allowed-targets)."
            )
        return endpoint

    def _allowed(self, host: str, addresses: list[IPAddress]) -> bool:
        for entry in self.hosts:
            if entry == host or (entry.startswith("*.") and host.endswith(entry[1:])):
                return True
        return bool(addresses) and all(
            any(a.version == n.version and a in n for n in self.networks) for a in addresses
        )
