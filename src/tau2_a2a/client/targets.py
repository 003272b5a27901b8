"""Which hosts an evaluation may connect to: the target policy of `tau2-a2a run` and `tau2-a2a serve`.

An evaluation connects to URLs others choose: the agent's endpoint, and the
interface URLs its card names. Link-local and cloud-metadata addresses are
always refused, in every form that still reaches them (IPv4-mapped,
IPv4-compatible, NAT64, 6to4 and Teredo IPv6 addresses). Beyond that, a
policy with entries allows only what they name: host names, `*.domain`
wildcards, IP addresses, CIDR networks, and the address classes `public`
(globally reachable, as the IANA IPv4 and IPv6 Special-Purpose Address
Registries say: the tables here, not the running Python's `ipaddress`, whose
`is_global` changed between versions), `private` (RFC 1918, fc00::/7,
100.64.0.0/10, local-use NAT64) and `loopback` (127.0.0.0/8, ::1). A policy
without entries allows every other address.

The client checks every connection when it is made: `addresses()` resolves
the host, checks each address, and the connection goes to those very
addresses (session.py pins HTTP connections and gRPC channels to them), so a
DNS answer that changes after an earlier check is caught too. The resolver
is a field, so tests can give answers that change between calls.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlparse

from tau2_a2a.errors import ConfigError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str], list[IPAddress]]

ALWAYS_REFUSED_NETWORKS: tuple[IPNetwork, ...] = (
    ipaddress.ip_network("169.254.0.0/16"),
    ipaddress.ip_network("fe80::/10"),
    ipaddress.ip_network("100.100.100.200/32"),
    ipaddress.ip_network("fd00:ec2::254/128"),
)
ALWAYS_REFUSED_HOSTS = frozenset({"metadata.google.internal"})

PUBLIC, PRIVATE, LOOPBACK = "public", "private", "loopback"
KEYWORDS = (PUBLIC, PRIVATE, LOOPBACK)
CLI_FLAG = "--a2a-allowed-targets"
SERVICE_FLAG = "--allowed-targets"

_NET = ipaddress.ip_network
_LOOPBACK = (_NET("127.0.0.0/8"), _NET("::1/128"))
_PRIVATE = (_NET("10.0.0.0/8"), _NET("172.16.0.0/12"), _NET("192.168.0.0/16"), _NET("100.64.0.0/10"),
            _NET("fc00::/7"), _NET("64:ff9b:1::/48"))  # the last: local-use NAT64 (RFC 8215)
_UNSPECIFIED = (_NET("0.0.0.0/8"), _NET("::/128"))
_MULTICAST = (_NET("224.0.0.0/4"), _NET("ff00::/8"))
# IPv6 forms that carry an IPv4 address a translator or tunnel delivers to
_MAPPED, _TRANSLATED = _NET("::ffff:0:0/96"), _NET("::ffff:0:0:0/96")
_COMPATIBLE, _NAT64, _LOCAL_NAT64 = _NET("::/96"), _NET("64:ff9b::/96"), _NET("64:ff9b:1::/48")
_SIX_TO_FOUR, _TEREDO = _NET("2002::/16"), _NET("2001::/32")
# Not globally reachable, per the IANA IPv4 and IPv6 Special-Purpose Address Registries (2025-10), besides
# the loopback, unspecified, private and multicast blocks above (judged first). 6to4, Teredo and the IPv4
# translation forms are judged by the IPv4 address they carry (`judged`), never as themselves.
_NOT_GLOBAL = tuple(_NET(n) for n in (
    "169.254.0.0/16", "192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
    "240.0.0.0/4",  # reserved, with the limited broadcast address 255.255.255.255
    "fe80::/10", "100::/64", "2001::/23", "2001:db8::/32", "2002::/16", "3fff::/20", "5f00::/16",
))
# The registries' globally reachable blocks inside those: anycast services (PCP, TURN, DNS-SD SRP), AMT,
# AS112, ORCHIDv2 and drone remote ID (DET) prefixes
_GLOBAL_EXCEPTIONS = tuple(_NET(n) for n in (
    "192.0.0.9/32", "192.0.0.10/32", "2001:1::1/128", "2001:1::2/128", "2001:1::3/128", "2001:3::/32",
    "2001:4:112::/48", "2001:20::/28", "2001:30::/28",
))
_GLOBAL_UNICAST = _NET("2000::/3")  # IPv6 beyond it is reserved by the IETF (or one of the blocks above)


class TargetRefused(ConfigError):
    """A target the policy does not allow; the message names the address class and the flag that allows it."""


class TargetUnresolvable(TargetRefused):
    """A host name DNS does not answer for."""


def resolve(host: str) -> list[IPAddress]:
    """Every address `host` resolves to (an IP literal resolves to itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as error:
        raise TargetUnresolvable(
            f"host {host!r} cannot be resolved ({getattr(error, 'strerror', None) or error}). "
            "Check the URL, or use an IP address."
        ) from None
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos))


def embedded_ipv4(address: IPAddress) -> list[tuple[ipaddress.IPv4Address, str]]:
    """The IPv4 addresses an IPv6 address carries, each with the name of its form, that a
    translator or tunnel may deliver it to (for local-use NAT64, at every RFC 6052 position)."""
    if address.version == 4:
        return []
    value = int(address)
    low32 = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if address in _MAPPED:
        return [(low32, "IPv4-mapped")]
    if address in _TRANSLATED:
        return [(low32, "IPv4-translated")]
    if address in _NAT64:
        return [(low32, "NAT64")]
    if address in _LOCAL_NAT64:
        return [(_rfc6052(value, prefix), "NAT64") for prefix in (48, 56, 64, 96)]
    if address in _SIX_TO_FOUR:
        return [(address.sixtofour, "6to4")]  # type: ignore[union-attr, list-item]
    if address in _TEREDO:
        server, client = address.teredo  # type: ignore[union-attr, misc]
        return [(server, "Teredo server"), (client, "Teredo client")]
    if address in _COMPATIBLE and value > 1:
        return [(low32, "IPv4-compatible")]
    return []


def _rfc6052(value: int, prefix: int) -> ipaddress.IPv4Address:
    """The IPv4 address at RFC 6052's position for an IPv4-embedded IPv6 address under a /`prefix`."""
    bits = f"{value:0128b}"
    v4 = bits[96:] if prefix == 96 else (bits[prefix:64] + bits[72:])[:32]
    return ipaddress.IPv4Address(int(v4, 2))


def judged(address: IPAddress) -> list[IPAddress]:
    """The addresses an address is judged as: the IPv4 addresses a translator or tunnel delivers it to
    (mapped, NAT64's well-known prefix, 6to4, Teredo), else itself (IPv4-compatible addresses are
    reserved, local-use NAT64 private)."""
    if address.version == 6 and (address in _COMPATIBLE or address in _LOCAL_NAT64):
        return [address]
    return [v4 for v4, _ in embedded_ipv4(address)] or [address]


def _within(address: IPAddress, networks: Iterable[IPNetwork]) -> bool:
    return any(address.version == n.version and address in n for n in networks)


def address_class(address: IPAddress) -> str:
    """public, private, loopback, unspecified, multicast or reserved (an address judged as itself), by the
    tables here alone, so every Python version classifies alike."""
    for networks, name in ((_LOOPBACK, LOOPBACK), (_UNSPECIFIED, "unspecified"), (_PRIVATE, PRIVATE),
                           (_MULTICAST, "multicast")):
        if _within(address, networks):
            return name
    if _within(address, _GLOBAL_EXCEPTIONS):
        return PUBLIC
    if _within(address, _NOT_GLOBAL) or (address.version == 6 and address not in _GLOBAL_UNICAST):
        return "reserved"
    return PUBLIC


def shown(address: IPAddress) -> str:
    """An address as messages write it: an IPv4-mapped one as ::ffff:a.b.c.d (RFC 5952, section 5), as
    Python 3.13 writes it and older versions do not."""
    if address.version == 6 and address in _MAPPED:
        return f"::ffff:{ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)}"
    return str(address)


def always_refused(address: IPAddress) -> str | None:
    """Why `address` is never allowed (link-local or metadata, also carried in an IPv6 form), or None."""
    for candidate, carried in [(address, "is")] + [(v4, f"carries {v4} ({form}),") for v4, form in
                                                   embedded_ipv4(address)]:
        for network in ALWAYS_REFUSED_NETWORKS:
            if candidate.version == network.version and candidate in network:
                return f"{carried} in {network} (link-local and cloud metadata addresses are never allowed)"
    return None


@dataclass(frozen=True)
class TargetPolicy:
    """Allowed targets: `entries` as given (none: any address but the always-refused ones).

    `flag` is the option that sets the entries, named in refusals so the
    reader knows what to pass.
    """

    entries: tuple[str, ...] = ()
    resolver: Resolver = field(default=resolve, repr=False)
    flag: str = field(default=CLI_FLAG, compare=False, repr=False)
    hosts: frozenset[str] = field(default=frozenset(), init=False, compare=False, repr=False)
    networks: tuple[IPNetwork, ...] = field(default=(), init=False, compare=False, repr=False)
    keywords: frozenset[str] = field(default=frozenset(), init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        keywords: set[str] = set()
        normal: list[str] = []
        for raw in self.entries:
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            normal.append(entry)
            if entry in KEYWORDS:
                keywords.add(entry)
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                wildcard_ok = "*" not in entry or (entry.startswith("*.") and "*" not in entry[1:])
                if not all(c.isalnum() or c in "-.*" for c in entry) or not wildcard_ok:
                    raise ConfigError(
                        f"Allowed target {raw!r} is neither a host name, a *.domain wildcard, an IP address, "
                        f"a CIDR network (e.g. 10.0.0.0/8) nor one of {', '.join(KEYWORDS)}."
                    ) from None
                hosts.add(entry)
        object.__setattr__(self, "entries", tuple(dict.fromkeys(normal)))
        object.__setattr__(self, "hosts", frozenset(hosts))
        object.__setattr__(self, "networks", tuple(networks))
        object.__setattr__(self, "keywords", frozenset(keywords))

    @classmethod
    def from_entries(cls, entries: Iterable[str], resolver: Resolver = resolve, flag: str = CLI_FLAG) -> TargetPolicy:
        return cls(entries=tuple(entries), resolver=resolver, flag=flag)

    @classmethod
    def parse(cls, text: str, flag: str = CLI_FLAG) -> TargetPolicy:
        """A comma-separated list, as `--a2a-allowed-targets` / `--allowed-targets` take it."""
        policy = cls.from_entries(text.split(","), flag=flag)
        if not policy.entries:
            raise ConfigError(f"{flag} needs at least one entry, e.g. {flag} public,loopback.")
        return policy

    @property
    def restricted(self) -> bool:
        return bool(self.entries)

    def describe(self) -> str:
        if not self.restricted:
            return "any host except link-local and cloud-metadata addresses"
        return ",".join(self.entries)

    def check(self, url: str, what: str | None = None) -> str:
        """`url` without a trailing slash if the policy allows its host; else TargetRefused saying why.

        `what` names the URL in the message (default: as the service's agent_endpoint).
        """
        hint = "" if what else " Pass the A2A agent's base URL, for example http://127.0.0.1:9000"
        what = what or f"agent_endpoint {url!r}"
        parsed = urlparse(url or "")
        try:
            host = parsed.hostname or ""
        except ValueError:
            host = ""
        if parsed.scheme not in ("http", "https") or not host:
            raise TargetRefused(f"{what} is not an http(s) URL.{hint}")
        self.addresses(host, what)
        return url.rstrip("/")

    def addresses(self, host: str, what: str) -> list[IPAddress]:
        """The addresses of `host` to connect to, every one checked; else TargetRefused saying why."""
        host = host.strip("[]").lower().rstrip(".")
        if host in ALWAYS_REFUSED_HOSTS:
            raise TargetRefused(f"{what} is refused: {host} is a cloud metadata service.")
        try:
            addresses = self.resolver(host)
        except TargetUnresolvable as error:
            raise TargetUnresolvable(f"{what}: {error}") from None
        literal = _is_literal(host)
        for address in addresses:
            why = always_refused(address)
            if why:
                raise TargetRefused(f"{what} is refused: {_subject(host, address, literal)} {why}.")
        if self.restricted and not self._host_allowed(host):
            for address in addresses:
                denied = self._denied(address)
                if denied is not None:
                    raise TargetRefused(f"{what} is refused: {self._refusal(host, address, denied, literal)}")
        return addresses

    def _host_allowed(self, host: str) -> bool:
        return any(entry == host or (entry.startswith("*.") and host.endswith(entry[1:])) for entry in self.hosts)

    def _denied(self, address: IPAddress) -> IPAddress | None:
        """The address (itself or the IPv4 address it carries) no entry allows, or None."""
        if any(address.version == n.version and address in n for n in self.networks):
            return None
        for plain in judged(address):
            if any(plain.version == n.version and plain in n for n in self.networks):
                continue
            if address_class(plain) in self.keywords:
                continue
            return plain
        return None

    def _refusal(self, host: str, address: IPAddress, denied: IPAddress, literal: bool) -> str:
        kind = address_class(denied)
        carried = f" (carrying {denied})" if denied != address else ""
        allow = kind if kind in KEYWORDS else shown(denied)
        if kind == PUBLIC and not literal:
            allow = host
        suggestion = ",".join(dict.fromkeys([*self.entries, allow]))
        article = "an" if kind[0] in "aeiou" else "a"
        return (f"{_subject(host, address, literal)}{carried} is {article} {kind} address, and the allowed targets "
                f"({self.describe()}) do not include it. To allow it: {self.flag} {suggestion}")


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _subject(host: str, address: IPAddress, literal: bool) -> str:
    """How a message names the address: itself for an IP literal, else what the host resolved to."""
    return shown(address) if literal else f"{host} resolves to {shown(address)}, which"


def grpc_host_port(target: str, what: str = "") -> tuple[str, int]:
    """Host and port of a card's gRPC target (`host:port`, `[v6]:port`, with or without a scheme)."""
    rest = target.split("://", 1)[-1].strip().rstrip("/")
    host, _, port = rest.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit() or "/" in rest or not 0 < int(port) < 65536:
        raise TargetRefused(f"{what or f'gRPC target {target!r}'} is not host:port, as a gRPC target must be.")
    return host, int(port)
