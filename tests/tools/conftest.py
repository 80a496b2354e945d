"""Fixtures for the governed-tools tests: a sandbox with an allowed root, sentinel files outside
it, a workspace, a policy built for the sandbox, gateways, and loopback HTTP servers."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.policy import Policy, parse_policy
from services.tools.calls import approve_all
from services.tools.gateway import ToolGateway
from services.workspace.manager import Workspace
from tests.loopback import LoopbackServer

__all__ = ["PAGE", "SENTINEL", "LoopbackServer", "Sandbox", "make_policy", "policy_data"]

SENTINEL = "SENTINEL-SECRET-7f3a"
VENV_BIN = str(Path(sys.executable).parent)


@dataclass
class Sandbox:
    base: Path
    root: Path  # the allowed root
    outside: Path  # sentinels live here; nothing may touch them
    workspace: Workspace

    def snapshot_outside(self) -> dict[str, Any]:
        state: dict[str, Any] = {}
        for path in sorted(self.outside.rglob("*")):
            st = os.lstat(path)
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else ""
            state[str(path.relative_to(self.outside))] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
        return state


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SENTINEL}\n", encoding="utf-8")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.txt").write_text(f"{SENTINEL} deep\n", encoding="utf-8")
    (root / "hello.txt").write_text("hello world\nsecond line\n", encoding="utf-8")
    (root / "sub").mkdir()
    (root / "sub" / "ok.txt").write_text("inside\n", encoding="utf-8")
    workspace = Workspace(tmp_path / "ws", "test")
    workspace.ensure_layout()
    return Sandbox(tmp_path, root, outside, workspace)


def policy_data(root: Path | str, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "version": 1,
        "mode": "guide",
        "providers": {"builtin": {"enabled": True}},
        "tool_classes": {"fs": "enabled", "shell": "enabled", "web": "enabled"},
        "limits": {"shell_kill_grace_s": 1, "web_connect_timeout_s": 2, "web_read_timeout_s": 2},
        "filesystem": {
            "allowed_roots": [str(root)],
            "deny": [
                {"id": "dotenv", "glob": "**/.env", "ops": ["read", "write"]},
                {"id": "ssh", "glob": "**/.ssh/**", "ops": ["read", "write", "list"]},
                {"id": "git-internals", "glob": "**/.git/**", "ops": ["write"]},
            ],
            "deny_extensions": [{"id": "keys", "extensions": [".pem", ".key"], "ops": ["read", "write"]}],
        },
        "shell": {
            "executables": [
                {"id": "inspect", "names": ["ls", "cat", "head", "grep", "echo", "true", "false", "sleep", "env"]},
                {"id": "python", "names": ["python3", "python"]},
                {"id": "admin", "names": ["sudo"]},
            ],
            "privileged": ["sudo"],
            "env_passthrough": ["PATH", "HOME", "LANG"],
            "search_path": [VENV_BIN, "/usr/bin", "/bin"],
        },
        "web": {"schemes": ["http", "https"], "allow_private": ["127.0.0.1"], "deny_domains": ["blocked.test"]},
    }
    for key, value in overrides.items():
        section, _, leaf = key.partition("__")
        if leaf:
            data.setdefault(section, {})[leaf] = value
        else:
            data[section] = value
    return data


def make_policy(root: Path | str, **overrides: Any) -> Policy:
    return parse_policy(json.dumps(policy_data(root, **overrides)), source="<test-policy>")


@pytest.fixture
def gateway_factory(sandbox: Sandbox) -> Iterator[Callable[..., ToolGateway]]:
    made: list[ToolGateway] = []

    def factory(policy: Policy | None = None, **kwargs: Any) -> ToolGateway:
        kwargs.setdefault("approver", approve_all)
        kwargs.setdefault("check_outputs", True)
        gateway = ToolGateway(sandbox.workspace, policy=policy or make_policy(sandbox.root), **kwargs)
        made.append(gateway)
        return gateway

    yield factory
    for gateway in made:
        gateway.close()


@pytest.fixture
def gateway(gateway_factory: Callable[..., ToolGateway]) -> ToolGateway:
    return gateway_factory()


# -- loopback HTTP servers ---------------------------------------------------------------------
PAGE = """<!doctype html>
<html><head><title>Aries  Test Page</title><style>body { color: red }</style>
<script>var secret = "do not extract";</script></head>
<body><h1>Heading</h1><p>First   paragraph with <b>bold</b> text.</p>
<ul><li>one</li><li>two</li></ul><pre>  keep
   spacing</pre><p>Caf&eacute; &amp; more</p><noscript>no script</noscript></body></html>
"""


@pytest.fixture(scope="session")
def web_server() -> Iterator[LoopbackServer]:
    from aiohttp import web

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 200_000, content_type="text/plain")

    async def redirect(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        target = "/page.html" if n <= 1 else f"/redirect/{n - 1}"
        raise web.HTTPFound(target)

    async def loop_(request: web.Request) -> web.Response:
        raise web.HTTPFound("/loop")

    async def to_https(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"https://127.0.0.1:{request.url.port}/page.html")

    async def to_blocked(request: web.Request) -> web.Response:
        raise web.HTTPFound("http://blocked.test/page.html")

    async def to_localhost(request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://localhost:{request.url.port}/page.html")

    async def goto(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["to"])

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.Response(text="late")

    async def searxng(request: web.Request) -> web.Response:
        if request.query.get("format") != "json":
            return web.Response(status=403, text="format not allowed")
        q = request.query.get("q", "")
        port = request.url.port
        results = [
            {
                "title": f"Result {i} for {q}",
                "url": f"http://127.0.0.1:{port}/page.html?i={i}",
                "content": f"snippet {i}",
                "engine": "loopback",
            }
            for i in range(1, 4)
        ]
        return web.json_response({"query": q, "number_of_results": len(results), "results": results})

    async def bad_searxng(request: web.Request) -> web.Response:
        return web.Response(text="<html>not json</html>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/page.html", page)
    app.router.add_get("/big", big)
    app.router.add_get("/redirect/{n}", redirect)
    app.router.add_get("/loop", loop_)
    app.router.add_get("/to-https", to_https)
    app.router.add_get("/to-blocked", to_blocked)
    app.router.add_get("/to-localhost", to_localhost)
    app.router.add_get("/slow", slow)
    app.router.add_get("/goto", goto)
    app.router.add_get("/searx/search", searxng)
    app.router.add_get("/badsearx/search", bad_searxng)
    server = LoopbackServer(app)
    yield server
    server.stop()


def deep_copy(value: Any) -> Any:
    return copy.deepcopy(value)
