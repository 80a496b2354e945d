"""The HTTP client behind the web tools: one deadline, every hop checked, typed failures.

``http_get(ctx, url, max_bytes=...)`` is the only way a web tool reaches the network:

* **Every hop is checked before it is connected to.**  Redirects are followed by hand
  (``allow_redirects=False``), at most ``limits.web_max_redirects`` of them; each target URL goes
  through ``ctx.policy.check_url`` (scheme, user info, denied/allowed domains, private hosts and their
  ports), must keep the first URL's scheme and must not have been visited already (a loop).  Host
  names are resolved by a resolver that passes every address through ``check_address``, so a public
  name that resolves to 127.0.0.1 is refused too (DNS-rebinding safe).  A refusal is a
  ``PolicyDenied`` naming the rule and the hop (``hop``: 1 for the first redirect).
* **One deadline per call.**  Connecting, waiting for headers and reading the body of every hop
  share one budget of ``limits.web_connect_timeout_s + limits.web_read_timeout_s`` seconds, further
  bounded by the tool's own deadline (``limits.tool_timeout_s``); a server that sends its headers and
  then drips one byte a second is cut off when the budget is spent.  ``web_connect_timeout_s`` also
  bounds each TCP connect and ``web_read_timeout_s`` each silent gap.  A ``Timeout`` names the
  deadline that passed (``details.deadline``: ``web_fetch``, ``tool``, ``connect``, ``read`` or
  ``cancelled``) and the phase (connecting, waiting for headers, reading the body), not a measured
  time.
* **Cancellation.**  The request runs in its own task, raced against the deadline and
  ``ctx.cancel`` (set by the gateway when the call is cancelled or times out); when either wins the
  task is cancelled, which closes the session and its sockets before ``http_get`` returns.
* **Typed failures.**  Refused or reset connections, DNS failures, TLS errors and answers that are
  not HTTP are ``NetworkError`` (retryable); deadlines are ``Timeout``.

aiohttp is imported inside the functions that use it.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

from services.errors import InvalidInput
from services.policy import BoundPolicy
from services.policy.model import PolicyDenied
from services.tools.registry import ToolContext
from services.tools.results import ToolNetworkError, ToolTimeout

USER_AGENT = "Aries/0.1 (builtin:web)"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_CANCEL_POLL_S = 0.05
_CHUNK = 65536
T = TypeVar("T")


@dataclass
class Fetched:
    url: str
    final_url: str
    status: int
    content_type: str
    body: bytes
    truncated: bool
    redirects: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Progress:
    """Where a request is, for the message of a deadline that passes."""

    url: str
    phase: str = "connecting to"
    hop: int = 0
    source: str = ""  # the URL that redirected here (hop > 0)


def _policy_resolver(policy: BoundPolicy) -> Any:
    """An aiohttp resolver that drops addresses the policy refuses (DNS-rebinding safe)."""
    import aiohttp
    from aiohttp.abc import AbstractResolver

    class PolicyResolver(AbstractResolver):
        def __init__(self) -> None:
            self.inner = aiohttp.ThreadedResolver()
            self.denied: PolicyDenied | None = None

        async def resolve(self, host: str, port: int = 0, family: Any = 0) -> Any:
            import socket

            results = await self.inner.resolve(host, port, family or socket.AF_UNSPEC)
            allowed = []
            for result in results:
                try:
                    policy.check_address(result["host"], host=host.lower().rstrip("."))
                except PolicyDenied as exc:
                    self.denied = exc
                    continue
                allowed.append(result)
            if not allowed:
                raise self.denied or PolicyDenied(f"{host} did not resolve", rule="web.private_address")
            return allowed

        async def close(self) -> None:
            await self.inner.close()

    return PolicyResolver()


# -- deadline and cancellation ----------------------------------------------------------------
async def _cancel_requested(ctx: ToolContext) -> None:
    while not ctx.cancel.is_set():
        await asyncio.sleep(_CANCEL_POLL_S)


async def race_deadline(ctx: ToolContext, budget_s: float, progress: Progress, work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work()`` in its own task until it ends, ``budget_s`` passes, the tool's deadline passes
    or ``ctx.cancel`` is set; in the last three cases the task is cancelled (and has finished, its
    connections closed) before ``ToolTimeout`` is raised."""
    now = time.monotonic()
    fetch_end = now + budget_s
    tool_end = ctx.deadline if ctx.deadline is not None else float("inf")
    end = min(fetch_end, tool_end)
    task: asyncio.Task[T] = asyncio.ensure_future(work())
    watcher = asyncio.ensure_future(_cancel_requested(ctx))
    try:
        done, _ = await asyncio.wait(
            {task, watcher}, timeout=max(0.0, end - time.monotonic()), return_when=asyncio.FIRST_COMPLETED
        )
    except BaseException:  # the caller was cancelled: stop the request before passing it on
        task.cancel()
        watcher.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
        raise
    watcher.cancel()
    if task in done:
        await asyncio.gather(watcher, return_exceptions=True)
        return task.result()
    task.cancel()
    await asyncio.gather(task, watcher, return_exceptions=True)
    where = f"{progress.phase} {progress.url!r}"
    details: dict[str, Any] = {"url": progress.url, "phase": progress.phase, "hop": progress.hop}
    if ctx.cancel.is_set() and time.monotonic() < end:
        message = f"the call was cancelled while {where}; the request was aborted"
        raise ToolTimeout(message, deadline="cancelled", **details)
    if tool_end <= fetch_end:
        limit = float(ctx.limits.tool_timeout_s)
        raise ToolTimeout(
            f"the tool deadline (limits.tool_timeout_s = {limit:g} s) passed while {where}",
            deadline="tool",
            limit_s=limit,
            **details,
        )
    raise ToolTimeout(
        f"the fetch deadline (limits.web_connect_timeout_s + limits.web_read_timeout_s = {budget_s:g} s, for "
        f"connecting, headers and body of every hop) passed while {where}",
        deadline="web_fetch",
        limit_s=budget_s,
        **details,
    )


# -- failures ---------------------------------------------------------------------------------
def network_failure(exc: BaseException, url: str, ctx: ToolContext) -> Exception:
    """Map an aiohttp/OS exception to a typed tool error (``NetworkError``, ``Timeout``)."""
    import aiohttp

    limits = ctx.limits
    name = type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        limit = float(limits.web_connect_timeout_s)
        return ToolTimeout(
            f"connecting to {url!r} took longer than limits.web_connect_timeout_s = {limit:g} s",
            url=url,
            deadline="connect",
            limit_s=limit,
        )
    if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        limit = float(limits.web_read_timeout_s)
        return ToolTimeout(
            f"{url!r} sent nothing for longer than limits.web_read_timeout_s = {limit:g} s",
            url=url,
            deadline="read",
            limit_s=limit,
        )
    if isinstance(exc, aiohttp.InvalidURL):
        return InvalidInput(f"not a URL aiohttp can fetch: {url!r}", rule="web.url")
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        host = urlsplit(url).hostname or url
        return ToolNetworkError(f"could not resolve host {host!r} ({exc.os_error})", url=url, reason="dns")
    if isinstance(exc, aiohttp.ClientSSLError):
        return ToolNetworkError(f"TLS error talking to {url!r}: {exc}"[:500], url=url, reason="tls")
    if isinstance(exc, aiohttp.ClientConnectorError):
        code = exc.os_error.errno
        why = os.strerror(code) if code else str(exc.os_error)
        return ToolNetworkError(f"could not connect to {url!r}: {why}"[:500], url=url, reason="connect", errno=code)
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientOSError):
        return ToolNetworkError(f"the connection to {url!r} was lost ({name}: {exc})"[:500], url=url, reason="reset")
    if isinstance(exc, aiohttp.ClientResponseError):
        return ToolNetworkError(
            f"{url!r} did not answer with valid HTTP ({exc.message or name})"[:500], url=url, reason="protocol"
        )
    if isinstance(exc, aiohttp.ClientError | OSError):
        return ToolNetworkError(f"could not fetch {url!r}: {name}: {exc}"[:500], url=url, reason="other")
    raise TypeError(f"not a network failure: {name}")


def _hop_refused(exc: PolicyDenied | InvalidInput, hop: int, source: str, target: str) -> PolicyDenied:
    details = {k: v for k, v in exc.details.items() if k not in {"rule", "hop", "url", "redirect_from"}}
    rule = str(exc.details.get("rule") or "web.redirect")
    return PolicyDenied(
        f"redirect hop {hop} from {source!r} to {target!r} refused: {exc.message}"[:1000],
        rule=rule,
        hop=hop,
        url=target,
        redirect_from=source,
        **details,
    )


# -- the request ------------------------------------------------------------------------------
async def http_get(ctx: ToolContext, url: str, *, max_bytes: int) -> Fetched:
    """GET ``url`` under the policy (every hop), one deadline and ``ctx.cancel``; body capped."""
    import aiohttp

    policy = ctx.policy
    limits = ctx.limits
    first = policy.check_url(url)
    resolver = _policy_resolver(policy)
    progress = Progress(url)
    budget = float(limits.web_connect_timeout_s) + float(limits.web_read_timeout_s)
    timeout = aiohttp.ClientTimeout(
        total=None, sock_connect=limits.web_connect_timeout_s, sock_read=limits.web_read_timeout_s
    )

    async def run() -> Fetched:
        connector = aiohttp.TCPConnector(resolver=resolver, use_dns_cache=False, force_close=True, limit=4)
        redirects: list[dict[str, Any]] = []
        visited = {url}
        current = url
        async with aiohttp.ClientSession(
            connector=connector, timeout=timeout, trust_env=False, headers={"User-Agent": USER_AGENT}
        ) as session:
            for hop in range(int(limits.web_max_redirects) + 1):
                progress.url, progress.hop, progress.phase = current, hop, "connecting to"
                response = await session.get(current, allow_redirects=False)
                async with response:
                    location = response.headers.get("Location")
                    if response.status in REDIRECT_STATUSES and location:
                        target = urljoin(current, location)
                        _check_hop(policy, first["scheme"], hop + 1, current, target, visited)
                        redirects.append({"status": response.status, "url": target})
                        visited.add(target)
                        progress.source, current = current, target
                        continue
                    progress.phase = "reading the body of"
                    chunks: list[bytes] = []
                    size = 0
                    truncated = False
                    async for chunk in response.content.iter_chunked(_CHUNK):
                        chunks.append(chunk)
                        size += len(chunk)
                        if size > max_bytes:
                            truncated = True
                            break
                    body = b"".join(chunks)[:max_bytes]
                    content_type = response.headers.get("Content-Type", "")
                    return Fetched(url, current, response.status, content_type, body, truncated, redirects)
            raise PolicyDenied(
                f"more than {int(limits.web_max_redirects)} redirects (limits.web_max_redirects); "
                f"stopped at hop {len(redirects)}: {current!r}",
                rule="web.max_redirects",
                hop=len(redirects),
                url=current,
                redirects=redirects,
            )

    try:
        return await race_deadline(ctx, budget, progress, run)
    except PolicyDenied as exc:  # from a hop check, or from the resolver (no hop named yet)
        if progress.hop and "hop" not in exc.details:
            raise _hop_refused(exc, progress.hop, progress.source, progress.url) from None
        raise
    except (ToolTimeout, InvalidInput):
        raise
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        if resolver.denied is not None:  # every address refused, reported by aiohttp as a DNS error
            if progress.hop:
                raise _hop_refused(resolver.denied, progress.hop, progress.source, progress.url) from None
            raise resolver.denied from None
        raise network_failure(exc, progress.url, ctx) from None


def _check_hop(policy: BoundPolicy, scheme: str, hop: int, source: str, target: str, visited: set[str]) -> None:
    """Refuse a redirect target before anything connects to it."""
    try:
        checked = policy.check_url(target, arg=f"redirect hop {hop}")
    except (PolicyDenied, InvalidInput) as exc:
        raise _hop_refused(exc, hop, source, target) from None
    if checked["scheme"] != scheme:
        raise PolicyDenied(
            f"redirect hop {hop} from {source!r} to {target!r} changes the scheme ({scheme} -> {checked['scheme']}); "
            "refused",
            rule="web.scheme_change",
            hop=hop,
            url=target,
            redirect_from=source,
        )
    if target in visited:
        raise PolicyDenied(
            f"redirect hop {hop} from {source!r} goes back to {target!r} (a redirect loop); refused",
            rule="web.redirect_loop",
            hop=hop,
            url=target,
            redirect_from=source,
        )


__all__ = ["USER_AGENT", "Fetched", "Progress", "http_get", "network_failure", "race_deadline"]
