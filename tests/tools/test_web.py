"""Web tools against loopback servers: SearXNG JSON search, fetch with redirects, caps, timeouts and
address checks, artifacts with provenance, deterministic extraction."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from services.text.htmltext import html_to_text
from services.tools.gateway import ToolGateway
from tests.tools.conftest import PAGE, LoopbackServer, Sandbox, make_policy

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def web_gateway(
    sandbox: Sandbox, web_server: LoopbackServer, gateway_factory: Callable[..., ToolGateway]
) -> ToolGateway:
    policy = make_policy(
        sandbox.root,
        web__schemes=["http", "https"],
        web__allow_private=[f"127.0.0.1:{web_server.port}"],
        web__deny_domains=["blocked.test"],
        web__searxng_url=f"{web_server.url}/searx",
    )
    return gateway_factory(policy)


def test_search_against_searxng_json(sandbox: Sandbox, web_gateway: ToolGateway, web_server: LoopbackServer) -> None:
    result = web_gateway.execute_sync("builtin:web:search", {"query": "aries tools", "max_results": 2})
    assert result.ok and result.data is not None, result.to_dict()
    assert [r["title"] for r in result.data["results"]] == ["Result 1 for aries tools", "Result 2 for aries tools"]
    assert result.data["results"][0]["snippet"] == "snippet 1" and result.data["results"][0]["engine"] == "loopback"
    assert result.meta["truncated"] is True  # 3 results, 2 asked for
    artifact = sandbox.workspace.artifacts.get(result.data["artifact_id"])
    assert result.data["citation"] == f"web:{artifact.id}"
    assert artifact.provenance["tool"] == "builtin:web:search" and artifact.provenance["query"] == "aries tools"


def test_search_needs_an_endpoint_and_its_format(
    sandbox: Sandbox, web_server: LoopbackServer, gateway_factory: Callable[..., ToolGateway]
) -> None:
    none = gateway_factory(make_policy(sandbox.root))
    result = none.execute_sync("builtin:web:search", {"query": "x"})
    assert result.error is not None and result.error.details["rule"] == "web.searxng_url"
    bad = gateway_factory(
        make_policy(
            sandbox.root,
            web__allow_private=[f"127.0.0.1:{web_server.port}"],
            web__schemes=["http"],
            web__searxng_url=f"{web_server.url}/badsearx",
        )
    )
    result = bad.execute_sync("builtin:web:search", {"query": "x"})
    assert result.error is not None and result.error.type == "InternalError"


def test_search_endpoint_errors(
    sandbox: Sandbox, web_server: LoopbackServer, gateway_factory: Callable[..., ToolGateway]
) -> None:
    policy = make_policy(
        sandbox.root,
        web__allow_private=[f"127.0.0.1:{web_server.port}"],
        web__schemes=["http"],
        web__searxng_url=f"{web_server.url}/nothing",
        limits={"web_max_bytes": 100},
    )
    result = gateway_factory(policy).execute_sync("builtin:web:search", {"query": "x"})
    assert result.error is not None and result.error.type == "InternalError" and not result.error.retryable
    assert result.error.details["status"] == 404
    capped = make_policy(
        sandbox.root,
        web__allow_private=[f"127.0.0.1:{web_server.port}"],
        web__schemes=["http"],
        web__searxng_url=f"{web_server.url}/searx",
        limits={"web_max_bytes": 100},
    )
    result = gateway_factory(capped).execute_sync("builtin:web:search", {"query": "x"})
    assert result.error is not None and "size limit" in result.error.message


def test_extract_plain_text_artifacts(sandbox: Sandbox, web_gateway: ToolGateway) -> None:
    artifact, _ = sandbox.workspace.artifacts.add_bytes(b"  plain words\n", "note.txt")
    result = web_gateway.execute_sync("builtin:web:extract", {"artifact_id": artifact.id, "max_chars": 5})
    assert result.ok and result.data is not None
    assert result.data["text"] == "plain" and result.data["truncated"] is True and result.data["source_url"] is None


def test_fetch_stores_the_body_as_an_artifact(
    sandbox: Sandbox, web_gateway: ToolGateway, web_server: LoopbackServer
) -> None:
    url = f"{web_server.url}/page.html"
    result = web_gateway.execute_sync("builtin:web:fetch", {"url": url})
    assert result.ok and result.data is not None, result.to_dict()
    data = result.data
    assert data["status"] == 200 and data["final_url"] == url and data["redirects"] == []
    assert data["content_type"].startswith("text/html") and data["truncated"] is False
    assert "<title>Aries  Test Page</title>" in data["preview"]
    artifact = sandbox.workspace.artifacts.get(data["artifact_id"])
    assert sandbox.workspace.artifacts.read_bytes(artifact) == PAGE.encode()
    assert artifact.name == "page.html" and data["citation"] == f"web:{artifact.id}"
    assert artifact.provenance["tool"] == "builtin:web:fetch" and artifact.provenance["url"] == url
    extracted = web_gateway.execute_sync("builtin:web:extract", {"artifact_id": artifact.id})
    assert extracted.ok and extracted.data is not None
    assert extracted.data["title"] == "Aries Test Page" and extracted.data["source_url"] == url
    assert "do not extract" not in extracted.data["text"] and "Heading" in extracted.data["text"]
    assert extracted.meta["decision"]["tier"] == "READ_ONLY"


def test_fetch_follows_allowed_redirects(web_gateway: ToolGateway, web_server: LoopbackServer) -> None:
    result = web_gateway.execute_sync("builtin:web:fetch", {"url": f"{web_server.url}/redirect/3"})
    assert result.ok and result.data is not None
    assert [r["url"] for r in result.data["redirects"]] == [
        f"{web_server.url}/redirect/2",
        f"{web_server.url}/redirect/1",
        f"{web_server.url}/page.html",
    ]
    assert result.data["final_url"] == f"{web_server.url}/page.html"


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/loop", "web.redirect_loop"),
        ("/redirect/9", "web.max_redirects"),
        ("/to-https", "web.scheme_change"),
        ("/to-blocked", "web.deny_domains"),
        ("/to-localhost", "web.private_address"),
    ],
)
def test_every_redirect_hop_is_checked(
    path: str, rule: str, web_gateway: ToolGateway, web_server: LoopbackServer
) -> None:
    result = web_gateway.execute_sync("builtin:web:fetch", {"url": f"{web_server.url}{path}"})
    assert result.error is not None and result.error.type == "PolicyDenied", result.to_dict()
    assert result.error.details["rule"] == rule
    assert isinstance(result.error.details["hop"], int) and "hop" in result.error.message


def test_fetch_caps_the_body(web_gateway: ToolGateway, web_server: LoopbackServer) -> None:
    result = web_gateway.execute_sync("builtin:web:fetch", {"url": f"{web_server.url}/big", "max_bytes": 1000})
    assert result.ok and result.data is not None
    assert result.data["bytes"] == 1000 and result.data["truncated"] is True and result.meta["truncated"] is True
    assert result.meta["bytes_read"] == 1000


def test_fetch_read_timeout(
    sandbox: Sandbox, web_server: LoopbackServer, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(
        make_policy(
            sandbox.root,
            web__allow_private=[f"127.0.0.1:{web_server.port}"],
            web__schemes=["http"],
            limits={"web_read_timeout_s": 0.5, "web_connect_timeout_s": 1},
        )
    )
    result = gateway.execute_sync("builtin:web:fetch", {"url": f"{web_server.url}/slow"})
    assert result.error is not None and result.error.type == "Timeout" and result.error.retryable
    assert result.error.details["deadline"] == "read" and "limits.web_read_timeout_s = 0.5 s" in result.error.message


def test_connection_refused_is_a_retryable_network_error(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy = make_policy(sandbox.root, web__schemes=["http"], web__allow_private=[f"127.0.0.1:{port}"])
    result = gateway_factory(policy).execute_sync("builtin:web:fetch", {"url": f"http://127.0.0.1:{port}/"})
    assert result.error is not None and result.error.type == "NetworkError" and result.error.retryable
    assert "Connection refused" in result.error.message and result.error.details["reason"] == "connect"


def test_private_addresses_need_an_explicit_allow(
    sandbox: Sandbox, web_server: LoopbackServer, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(make_policy(sandbox.root, web__allow_private=[], web__schemes=["http"]))
    port = web_server.port
    urls = [
        f"http://127.0.0.1:{port}/page.html",
        f"http://localhost:{port}/page.html",
        f"http://[::1]:{port}/page.html",
        f"http://[::ffff:127.0.0.1]:{port}/page.html",
        f"http://0.0.0.0:{port}/",
        f"http://10.0.0.1:{port}/",
        "http://169.254.169.254/latest/meta-data/",
    ]
    hostname = socket.gethostname()
    try:
        resolved = {info[4][0] for info in socket.getaddrinfo(hostname, port)}
    except OSError:
        resolved = set()
    if resolved and all(str(a).startswith(("127.", "10.", "192.168.", "172.", "::1")) for a in resolved):
        urls.append(f"http://{hostname}:{port}/page.html")  # a plain name that resolves to a private address
    for url in urls:
        result = gateway.execute_sync("builtin:web:fetch", {"url": url})
        assert result.error is not None and result.error.type == "PolicyDenied", (url, result.to_dict())
        assert result.error.details["rule"] == "web.private_address", url
    for url in (f"http://2130706433:{port}/", f"http://0x7f.1:{port}/", f"http://127.1:{port}/"):
        result = gateway.execute_sync("builtin:web:fetch", {"url": url})
        assert result.error is not None and result.error.details["rule"] == "web.noncanonical_ip", url


@pytest.mark.parametrize(
    ("url", "rule"),
    [
        ("ftp://127.0.0.1/x", "web.schemes"),
        ("file:///etc/passwd", "web.schemes"),
        ("http://user:pw@127.0.0.1/", "web.userinfo"),
        ("http://127.0.0.1@evil.example/", "web.userinfo"),
        ("http://blocked.test/", "web.deny_domains"),
        ("http://sub.blocked.test/", "web.deny_domains"),
        ("http://127.0.0.1:99999/", "web.url"),
        ("http://exa mple.org/", "web.url"),
        ("http:///nohost", "web.url"),
    ],
)
def test_url_refusals(url: str, rule: str, sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    policy = make_policy(
        sandbox.root,
        web__schemes=["http", "https"],
        web__allow_private=["127.0.0.1:80"],
        web__deny_domains=["blocked.test", "*.blocked.test"],
    )
    result = gateway_factory(policy).execute_sync("builtin:web:fetch", {"url": url})
    assert result.error is not None and result.error.details["rule"] == rule, result.to_dict()


def test_allow_domains_is_an_allowlist(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    policy = make_policy(sandbox.root, web__schemes=["https"], web__allow_domains=["docs.python.org"])
    gateway = gateway_factory(policy)
    assert gateway.explain("builtin:web:fetch", {"url": "https://docs.python.org/3/"}).action == "confirm"
    decision = gateway.explain("builtin:web:fetch", {"url": "https://pypi.org/"})
    assert decision.action == "deny" and decision.rule == "web.allow_domains"


def test_network_is_off_in_the_default_policy(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway], web_server: LoopbackServer
) -> None:
    from services.policy import default_policy

    gateway = gateway_factory(default_policy())
    result = gateway.execute_sync("builtin:web:fetch", {"url": f"{web_server.url}/page.html"})
    assert result.error is not None and result.error.details["rule"] == "tool_classes.web"


def test_extract_refuses_urls_and_unknown_ids(sandbox: Sandbox, web_gateway: ToolGateway) -> None:
    for ref, kind in (("http://127.0.0.1/page.html", "InvalidInput"), ("0123456789ab", "NotFound")):
        result = web_gateway.execute_sync("builtin:web:extract", {"artifact_id": ref})
        assert result.error is not None and result.error.type == kind
    artifact, _ = sandbox.workspace.artifacts.add_bytes(b"\x00\x01binary", "blob.bin")
    result = web_gateway.execute_sync("builtin:web:extract", {"artifact_id": artifact.id})
    assert result.error is not None and result.error.type == "InvalidInput"


def test_html_to_text_is_deterministic() -> None:
    title, text = html_to_text(PAGE)
    assert title == "Aries Test Page"
    assert text == (
        "Heading\n\nFirst paragraph with bold text.\n\n- one\n\n- two\n\n  keep\n   spacing\n\nCaf\u00e9 & more"
    )
    assert html_to_text(PAGE) == (title, text)
