"""The service's target policy: which agent endpoints it evaluates, and the words of a refusal."""

from __future__ import annotations

import pytest

from tau2_a2a.client.targets import TargetPolicy, TargetRefused
from tests.support.targets import RESOLVER


@pytest.mark.parametrize("endpoint, words", [
    ("http://169.254.169.254/latest", "169.254.0.0/16"),
    ("http://evil.example.net:8080", "resolves to 169.254.169.254"),
    ("http://metadata.google.internal/computeMetadata", "cloud metadata service"),
    ("http://100.100.100.200/", "100.100.100.200/32"),
    ("http://[fd00:ec2::254]/", "fd00:ec2::254/128"),
    ("http://[fe80::1]:9000", "fe80::/10"),
    ("http://[::ffff:169.254.169.254]/", "169.254.0.0/16"),
])
def test_link_local_and_metadata_targets_are_always_refused(endpoint: str, words: str) -> None:
    for policy in (TargetPolicy(resolver=RESOLVER),
                   TargetPolicy.from_entries(["0.0.0.0/0", "::/0", "*.example.net"], resolver=RESOLVER)):
        with pytest.raises(TargetRefused, match="refused") as refused:
            policy.check(endpoint)
        assert words in str(refused.value)


def test_allow_list_of_hosts_wildcards_and_networks() -> None:
    policy = TargetPolicy.from_entries(["localhost", "*.example.com", "10.0.0.0/8"], resolver=RESOLVER)
    assert policy.check("http://localhost:9000/") == "http://localhost:9000"
    assert policy.check("https://agents.example.com") == "https://agents.example.com"
    assert policy.check("http://inside.corp:1") == "http://inside.corp:1"
    with pytest.raises(TargetRefused) as refused:
        policy.check("http://192.0.2.1:9000")
    assert str(refused.value) == (
        "agent_endpoint 'http://192.0.2.1:9000' is refused: 192.0.2.1 is a reserved address, and the allowed "
        "targets (localhost,*.example.com,10.0.0.0/8) do not include it. To allow it: --a2a-allowed-targets "
        "localhost,*.example.com,10.0.0.0/8,192.0.2.1")
    assert TargetPolicy(resolver=RESOLVER).check("http://192.0.2.1:9000") == "http://192.0.2.1:9000"


def test_malformed_endpoint_and_allow_list_entries_get_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"agent_endpoint 'ftp://x' is not an http\(s\) URL"):
        TargetPolicy(resolver=RESOLVER).check("ftp://x")
    with pytest.raises(ValueError, match="neither a host name"):
        TargetPolicy.from_entries(["http://a/b"])
