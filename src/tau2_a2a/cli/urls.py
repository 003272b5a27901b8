"""The URLs a served agent's card advertises: `--card-url`, as AgentBeats starts an image, else where it listens.

`tau2-a2a serve` and every `tau2-a2a agent` take `--card-url URL` (serve also as `--public-url`): the URL the
card gives clients, such as `http://green-agent:9009` on a scenario's Docker network, while the agent listens on
`--host` and `--port`. Without it the card gives `http://HOST:PORT`, and for a host meaning every address
(0.0.0.0, ::) this machine's outward address, never the wildcard, which no client can reach.
"""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit

from tau2_a2a.client.config import without_userinfo
from tau2_a2a.errors import ConfigError

WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def add_card_url_flag(parser: argparse.ArgumentParser, *aliases: str) -> None:
    """`--card-url` (and `aliases`, one argument with one meaning), as AgentBeats passes it to an image."""
    parser.add_argument("--card-url", *aliases, dest="card_url", default=None, metavar="URL",
                        help="The URL the card advertises, e.g. http://green-agent:9009 (AgentBeats passes it); "
                             "default http://HOST:PORT, this machine's address when HOST is 0.0.0.0 or ::")


def advertised_urls(host: str, port: int, grpc_port: int | None = None, card_url: str | None = None,
                    grpc_url: str | None = None) -> tuple[str, str | None]:
    """The HTTP URL and the gRPC host:port (None without a gRPC port) the card declares.

    The gRPC address defaults to the card URL's host name on `grpc_port`. A card URL that no client could use
    (not http(s), no host, a user name or password, a query) raises ConfigError.
    """
    if card_url is None:
        name = _bracketed(_reachable(host))
        url = f"http://{name}:{port}"
    else:
        url = _checked(card_url)
        name = _bracketed(urlsplit(url).hostname or "")
    grpc = (grpc_url or f"{name}:{grpc_port}") if grpc_port else None
    return url, grpc


def _checked(card_url: str) -> str:
    parts = urlsplit(card_url.strip())
    try:
        parts.port  # noqa: B018 (a port that is not a number raises here)
        usable = parts.scheme in ("http", "https") and parts.hostname and not (
            parts.username or parts.password or parts.query or parts.fragment)
    except ValueError:
        usable = False
    if not usable:
        raise ConfigError(f"--card-url must be the http(s) URL clients reach this agent at, with no user name, "
                          f"password or query, e.g. http://green-agent:9009; got {without_userinfo(card_url)!r}.")
    return card_url.strip().rstrip("/")


def _reachable(host: str) -> str:
    if host not in WILDCARD_HOSTS:
        return host
    from tau2_a2a.mcp.tool_server import advertised_host  # the MCP tools server's answer to the same question

    return advertised_host(host)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host
