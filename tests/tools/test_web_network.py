"""The web client fails closed: one deadline per fetch (a dripping body cannot outlast it), cancellation
aborts the request and closes its connection, every redirect hop is checked before it is connected
to, and network failures are typed (NetworkError, Timeout) — against real loopback servers."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest

from services.errors import ConfigError
from services.policy import BoundPolicy
from services.tools.gateway import ToolGateway
from services.tools.registry import ToolContext
from services.tools.results import ToolTimeout
from services.tools.webclient import http_get
from tests.loopback import LoopbackServer
from tests.tools.conftest import Sandbox, make_policy

pytestmark = pytest.mark.timeout(60)


def _ports_supported() -> bool:
    """Whether the policy understands ``host:port`` in web.allow_private (the policy branch adds it)."""
    try:
        make_policy("/tmp", web__allow_private=["127.0.0.1:1"])
    except ConfigError:
        return False
    return True


def _allow_loopback(*ports: int) -> list[str]:
    return [f"127.0.0.1:{port}" for port in ports] if _ports_supported() else ["127.0.0.1"]


def _policy(sandbox: Sandbox, *ports: int, **limits: float) -> Any:
    return make_policy(
        sandbox.root,
        web__schemes=["http", "https"],
        web__allow_private=_allow_loopback(*ports),
        web__deny_domains=["blocked.test"],
        limits={"web_connect_timeout_s": 1, "web_read_timeout_s": 2, **limits},
    )


class Drip:
    """A page that sends its headers, then one byte every ``interval`` seconds, forever."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.started = threading.Event()

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        self.started.set()
        while True:
            await response.write(b"x")
            await asyncio.sleep(self.interval)


def _wait_closed(server: LoopbackServer, within: float = 3.0) -> int:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if server.open_connections() == 0:
            return 0
        time.sleep(0.05)
    return server.open_connections()


# -- one deadline --------------------------------------------------------------------------------
def test_a_dripping_body_is_cut_by_the_fetch_deadline(
    sandbox: Sandbox, loopback: Callable[..., LoopbackServer], gateway_factory: Callable[..., ToolGateway]
) -> None:
    server = loopback({"/drip": Drip(0.5).handle})
    gateway = gateway_factory(_policy(sandbox, server.port))  # budget: 1 s connect + 2 s read = 3 s
    started = time.monotonic()
    result = gateway.execute_sync("builtin:web:fetch", {"url": f"{server.url}/drip"})
    elapsed = time.monotonic() - started
    assert result.error is not None and result.error.type == "Timeout", result.to_dict()
    details = result.error.details
    assert details["deadline"] == "web_fetch" and details["phase"] == "reading the body of"
    assert "limits.web_connect_timeout_s + limits.web_read_timeout_s = 3 s" in result.error.message
    assert elapsed < 3 + 2.5, elapsed  # it ended near the deadline, not when the server gave up
    assert _wait_closed(server) == 0
    assert sandbox.workspace.artifacts.list() == []


def test_redirect_hops_share_one_deadline(
    sandbox: Sandbox, loopback: Callable[..., LoopbackServer], gateway_factory: Callable[..., ToolGateway]
) -> None:
    """Each hop answers within the read timeout, but the chain together outlasts the fetch deadline."""
    from aiohttp import web

    async def hop(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        await asyncio.sleep(0.7)
        if n == 0:
            return web.Response(text="done")
        raise web.HTTPFound(f"/hop/{n - 1}")

    server = loopback({"/hop/{n}": hop})
    gateway = gateway_factory(_policy(sandbox, server.port, web_read_timeout_s=1, web_max_redirects=10))
    result = gateway.execute_sync("builtin:web:fetch", {"url": f"{server.url}/hop/5"})  # ~4.2 s in all
    assert result.error is not None and result.error.type == "Timeout", result.to_dict()
    assert result.error.details["deadline"] == "web_fetch" and result.error.details["hop"] >= 1


def test_the_tool_deadline_aborts_the_fetch_and_stores_nothing(
    sandbox: Sandbox, loopback: Callable[..., LoopbackServer], gateway_factory: Callable[..., ToolGateway]
) -> None:
    server = loopback({"/drip": Drip(0.2).handle})
    policy = _policy(sandbox, server.port, web_read_timeout_s=60, tool_timeout_s=1)
    started = time.monotonic()
    result = gateway_factory(policy).execute_sync("builtin:web:fetch", {"url": f"{server.url}/drip"})
    assert time.monotonic() - started < 1 + 2.5
    assert result.error is not None and result.error.type == "Timeout", result.to_dict()
    assert _wait_closed(server) == 0
    assert sandbox.workspace.artifacts.list() == []


def test_setting_the_cancel_event_aborts_the_request(sandbox: Sandbox, loopback: Callable[..., LoopbackServer]) -> None:
    """``ctx.cancel`` (what the gateway sets on cancel or timeout) stops a request in flight."""
    drip = Drip(0.2)
    server = loopback({"/drip": drip.handle})
    bound = BoundPolicy(_policy(sandbox, server.port, web_read_timeout_s=60), sandbox.workspace.root)
    ctx = ToolContext("call-1", "builtin:web:fetch", bound, sandbox.workspace, None)

    def cancel_when_dripping() -> None:
        drip.started.wait(10)
        time.sleep(0.3)
        ctx.cancel.set()

    threading.Thread(target=cancel_when_dripping, daemon=True).start()
    started = time.monotonic()
    with pytest.raises(ToolTimeout) as caught:
        asyncio.run(http_get(ctx, f"{server.url}/drip", max_bytes=1 << 20))
    assert time.monotonic() - started < 5
    assert caught.value.details["deadline"] == "cancelled" and "cancelled" in caught.value.message
    assert caught.value.details["phase"] == "reading the body of"
    assert _wait_closed(server) == 0


# -- every hop is checked ------------------------------------------------------------------------
def _goto(server: LoopbackServer, target: str) -> str:
    return f"{server.url}/goto?to={quote(target, safe='')}"


@pytest.mark.parametrize(
    ("target", "rule"),
    [
        ("ftp://127.0.0.1/x", "web.schemes"),
        ("file:///etc/passwd", "web.schemes"),
        ("http://blocked.test/page.html", "web.deny_domains"),
        ("http://user:pw@127.0.0.1/", "web.userinfo"),
        ("http://[::1]/", "web.private_address"),
        ("http://169.254.169.254/latest/meta-data/", "web.private_address"),
    ],
)
def test_a_redirect_to_a_refused_url_names_the_hop(
    target: str,
    rule: str,
    sandbox: Sandbox,
    web_server: LoopbackServer,
    gateway_factory: Callable[..., ToolGateway],
) -> None:
    gateway = gateway_factory(_policy(sandbox, web_server.port))
    result = gateway.execute_sync("builtin:web:fetch", {"url": _goto(web_server, target)})
    assert result.error is not None and result.error.type == "PolicyDenied", result.to_dict()
    assert result.error.details["rule"] == rule and result.error.details["hop"] == 1
    assert "redirect hop 1" in result.error.message
    # two hops: the second one is named
    result = gateway.execute_sync("builtin:web:fetch", {"url": _goto(web_server, _goto(web_server, target))})
    assert result.error is not None and result.error.details["rule"] == rule and result.error.details["hop"] == 2


def test_a_redirect_loop_is_refused_at_the_hop_that_closes_it(
    sandbox: Sandbox, web_server: LoopbackServer, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(_policy(sandbox, web_server.port))
    first = f"{web_server.url}/goto?to={quote('/goto?to=' + quote('/loop', safe=''), safe='')}"
    result = gateway.execute_sync("builtin:web:fetch", {"url": first})
    assert result.error is not None and result.error.details["rule"] == "web.redirect_loop", result.to_dict()
    assert result.error.details["hop"] == 3  # /goto -> /goto -> /loop -> /loop


def test_a_redirect_to_a_port_that_is_not_allowed_is_refused(
    sandbox: Sandbox,
    web_server: LoopbackServer,
    loopback: Callable[..., LoopbackServer],
    gateway_factory: Callable[..., ToolGateway],
) -> None:
    """Allowing 127.0.0.1:<port> allows that port only: a redirect to another port on the same host is
    refused before it is connected to (the other server never sees a request)."""
    from aiohttp import web

    async def secret(request: web.Request) -> web.Response:
        return web.Response(text="internal admin page")

    other = loopback({"/admin": secret})
    if not _ports_supported():
        pytest.xfail("web.allow_private has no port rules on this branch yet (the policy branch adds them)")
    gateway = gateway_factory(_policy(sandbox, web_server.port))
    result = gateway.execute_sync("builtin:web:fetch", {"url": _goto(web_server, f"{other.url}/admin")})
    assert result.error is not None and result.error.type == "PolicyDenied", result.to_dict()
    assert result.error.details["hop"] == 1 and other.requests == []


# -- typed network failures ----------------------------------------------------------------------
def test_dns_failure_is_a_network_error(sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]) -> None:
    result = gateway_factory(_policy(sandbox)).execute_sync(
        "builtin:web:fetch", {"url": "http://nothing-here.invalid/"}
    )
    assert result.error is not None and result.error.type == "NetworkError", result.to_dict()
    assert result.error.details["reason"] == "dns" and "could not resolve" in result.error.message


def test_reset_and_non_http_peers_are_network_errors(
    sandbox: Sandbox, loopback: Callable[..., LoopbackServer], gateway_factory: Callable[..., ToolGateway]
) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.transport.abort()  # RST

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(b"\x00\x01 this is not HTTP at all\r\n\r\n")
        await writer.drain()

    for handler, reasons in ((hang_up, {"reset"}), (garbage, {"protocol", "reset"})):
        server = loopback(stream_handler=handler)
        gateway = gateway_factory(_policy(sandbox, server.port))
        result = gateway.execute_sync("builtin:web:fetch", {"url": f"{server.url}/"})
        assert result.error is not None and result.error.type == "NetworkError", result.to_dict()
        assert result.error.retryable and result.error.details["reason"] in reasons


def test_tls_to_a_plain_http_server_is_a_network_error(
    sandbox: Sandbox, web_server: LoopbackServer, gateway_factory: Callable[..., ToolGateway]
) -> None:
    gateway = gateway_factory(_policy(sandbox, web_server.port))
    result = gateway.execute_sync("builtin:web:fetch", {"url": f"https://127.0.0.1:{web_server.port}/page.html"})
    assert result.error is not None and result.error.type == "NetworkError", result.to_dict()
    assert result.error.details["reason"] in {"tls", "reset"}


def test_search_against_a_dead_endpoint_is_a_network_error(
    sandbox: Sandbox, gateway_factory: Callable[..., ToolGateway]
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    policy = make_policy(
        sandbox.root,
        web__schemes=["http"],
        web__allow_private=_allow_loopback(port),
        web__searxng_url=f"http://127.0.0.1:{port}",
    )
    result = gateway_factory(policy).execute_sync("builtin:web:search", {"query": "x"})
    assert result.error is not None and result.error.type == "NetworkError", result.to_dict()
