"""Network rules fail closed: denied domains cover their subdomains, ``*.`` semantics are
explicit, hosts are compared case-insensitively on IDNA names, private hosts are reachable only
on the ports the policy lists, and ``check_url`` (called for every redirect hop) checks host
and port."""

from __future__ import annotations

from typing import Any

import pytest

from services.errors import ConfigError, InvalidInput
from services.policy import BoundPolicy, PolicyDenied, parse_policy
from tests.tools.conftest import Sandbox, policy_data

pytestmark = pytest.mark.timeout(30)


def _bound(sandbox: Sandbox, **web: Any) -> BoundPolicy:
    data = policy_data(sandbox.root)
    data["web"] = {"schemes": ["http", "https"], **web}
    import json

    return BoundPolicy(parse_policy(json.dumps(data), source="<net>"), sandbox.workspace.root)


def _rule(bound: BoundPolicy, url: str) -> str | None:
    try:
        bound.check_url(url)
    except PolicyDenied as exc:
        return exc.rule
    except InvalidInput as exc:
        return str(exc.details.get("rule"))
    return None


def test_denied_domain_denies_every_subdomain(sandbox: Sandbox) -> None:
    bound = _bound(sandbox, deny_domains=["evil.example"])
    for url in (
        "https://evil.example/",
        "https://a.evil.example/",
        "https://a.b.evil.example/x",
        "https://EVIL.Example./",
        "https://Sub.EVIL.example.:443/",
    ):
        assert _rule(bound, url) == "web.deny_domains", url
    assert _rule(bound, "https://notevil.example/") is None
    assert _rule(bound, "https://evil.example.org/") is None
    wildcard = _bound(sandbox, deny_domains=["*.evil.example"])
    assert _rule(wildcard, "https://evil.example/") == "web.deny_domains"  # denying fails closed


def test_allowed_domain_is_exact_unless_a_wildcard_is_listed(sandbox: Sandbox) -> None:
    exact = _bound(sandbox, allow_domains=["example.com"])
    assert _rule(exact, "https://example.com/") is None
    assert _rule(exact, "https://EXAMPLE.com./") is None
    assert _rule(exact, "https://www.example.com/") == "web.allow_domains"
    assert _rule(exact, "https://badexample.com/") == "web.allow_domains"
    subs = _bound(sandbox, allow_domains=["*.example.com"])
    assert _rule(subs, "https://www.example.com/") is None
    assert _rule(subs, "https://a.b.example.com/") is None
    assert _rule(subs, "https://example.com/") == "web.allow_domains"
    assert _rule(subs, "https://xexample.com/") == "web.allow_domains"


def test_idna_names_match_their_punycode_form(sandbox: Sandbox) -> None:
    bound = _bound(sandbox, deny_domains=["bücher.example"], allow_domains=["*.example", "xn--caf-dma.test"])
    assert _rule(bound, "https://xn--bcher-kva.example/") == "web.deny_domains"
    assert _rule(bound, "https://BÜCHER.example/") == "web.deny_domains"
    assert _rule(bound, "https://shop.bücher.example/") == "web.deny_domains"
    assert _rule(bound, "https://café.test/") is None


def test_private_host_is_reachable_only_on_listed_ports(sandbox: Sandbox) -> None:
    bound = _bound(
        sandbox,
        allow_private=["127.0.0.1:8080", "localhost:11434", "[::1]:9000", {"host": "10.1.2.3", "ports": [80, 443]}],
    )
    assert _rule(bound, "http://127.0.0.1:8080/") is None
    assert _rule(bound, "http://127.0.0.1:8081/") == "web.private_port"
    assert _rule(bound, "http://127.0.0.1/") == "web.private_port"  # port 80 is not listed
    assert _rule(bound, "http://localhost:11434/api") is None
    assert _rule(bound, "http://LOCALHOST.:11434/api") is None
    assert _rule(bound, "http://localhost:8080/") == "web.private_port"
    assert _rule(bound, "http://[::1]:9000/") is None
    assert _rule(bound, "http://[::1]:9001/") == "web.private_port"
    assert _rule(bound, "http://10.1.2.3/") is None and _rule(bound, "https://10.1.2.3/") is None
    assert _rule(bound, "http://10.1.2.3:22/") == "web.private_port"
    assert _rule(bound, "http://10.1.2.4/") == "web.private_address"
    # An address a name resolved to (DNS rebinding) gets the same port rule.
    bound.check_address("127.0.0.1", host="localhost", port=11434)
    with pytest.raises(PolicyDenied) as exc:
        bound.check_address("127.0.0.1", host="rebind.example", port=22)
    assert exc.value.rule == "web.private_port"


def test_private_host_without_ports_allows_none(sandbox: Sandbox) -> None:
    bound = _bound(sandbox, allow_private=["127.0.0.1", "localhost", "10.0.0.0/8"])
    for url in ("http://127.0.0.1/", "http://127.0.0.1:8080/", "http://localhost:3000/", "http://10.9.9.9/"):
        assert _rule(bound, url) == "web.private_port", url
    networks = _bound(sandbox, allow_private=["10.0.0.0/8:8443"])
    assert _rule(networks, "https://10.20.30.40:8443/") is None
    assert _rule(networks, "https://10.20.30.40/") == "web.private_port"
    assert _rule(networks, "https://192.168.1.1:8443/") == "web.private_address"


def test_every_redirect_hop_is_checked_for_host_and_port(sandbox: Sandbox) -> None:
    """What the web tool does per hop: the first URL passes, a redirect target must pass too."""
    bound = _bound(sandbox, allow_private=["127.0.0.1:8080"], deny_domains=["blocked.test"])
    hops = {
        "http://127.0.0.1:8080/next": None,
        "http://127.0.0.1:22/": "web.private_port",
        "http://127.0.0.1:8080@evil.example/": "web.userinfo",
        "http://sub.blocked.test/": "web.deny_domains",
        "http://localhost:8080/": "web.private_address",
        "http://169.254.169.254/latest/meta-data/": "web.private_address",
        "http://[::ffff:127.0.0.1]:8081/": "web.private_port",
        "http://0x7f.1:8080/": "web.noncanonical_ip",
    }
    for url, rule in hops.items():
        assert _rule(bound, url) == rule, url


@pytest.mark.parametrize(
    ("web", "fragment"),
    [
        ({"allow_private": ["127.0.0.1:99999"]}, "not a port number"),
        ({"allow_private": ["127.0.0.1:http"]}, "not a port number"),
        ({"allow_private": ["[::1"]}, "[address]:port"),
        ({"allow_private": [{"host": "127.0.0.1", "ports": ["x"]}]}, "allow_private"),
        ({"deny_domains": ["evil.*.example"]}, "only wildcard"),
        ({"allow_domains": ["exa mple.com"]}, "not a domain name"),
    ],
)
def test_bad_network_entries_are_config_errors_with_a_line(web: dict[str, Any], fragment: str) -> None:
    import json

    text = "version: 1\nweb:\n" + "".join(f"  {key}: {json.dumps(value)}\n" for key, value in web.items())
    with pytest.raises(ConfigError) as exc:
        parse_policy(text, source="policy.yaml")
    assert exc.value.message.startswith("policy.yaml:3: ") and fragment in exc.value.message, exc.value.message
