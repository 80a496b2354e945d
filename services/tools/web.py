"""Builtin web tools: search (SearXNG JSON API), fetch, extract.

``search`` and ``fetch`` reach the network only through ``services.tools.webclient.http_get``:
redirects followed by hand with every hop checked by the policy (host and port, scheme unchanged,
no loops, at most ``limits.web_max_redirects``), resolved addresses checked before connecting, one
deadline for connect, headers and body of every hop, ``ctx.cancel`` honoured (the request is
aborted and its connection closed), and typed failures (``NetworkError``, ``Timeout``).  Bodies are
capped (``truncated``) and stored as artifacts with their provenance; the citation handle is
``web:<artifact id>``.  A fetch or search that is cancelled or times out stores nothing.
``extract`` turns a stored HTML artifact into text deterministically (``services.text.htmltext``) and
touches no network (READ_ONLY).
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from pydantic import MISSING

from services.clock import utc_now
from services.errors import InvalidInput, NotFound
from services.policy import Resource, RiskTier, SearchEndpointUse, UrlUse
from services.policy.model import PolicyDenied
from services.text.htmltext import html_to_text
from services.tools import schemas, snapshots
from services.tools.args import WebExtractArgs, WebFetchArgs, WebSearchArgs, given
from services.tools.outputs import WebExtractOutput, WebFetchOutput, WebRedirect, WebSearchOutput, WebSearchResult
from services.tools.registry import ToolContext, ToolSpec, tool
from services.tools.results import ToolInternalError, ToolOutput, ToolTimeout
from services.tools.webclient import http_get

if TYPE_CHECKING:
    from services.workspace.artifacts import Artifact

TOOLS: list[ToolSpec] = []
_PREVIEW_CHARS = 2000


def _artifact_name(url: str, content_type: str) -> str:
    path = urlsplit(url).path.rstrip("/")
    last = path.rsplit("/", 1)[-1] if path else ""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", last)[:100].lstrip(".-") or "index"
    mime = content_type.split(";", 1)[0].strip().lower()
    if "." not in name:
        name += {
            "text/html": ".html",
            "application/json": ".json",
            "text/plain": ".txt",
            "application/xhtml+xml": ".html",
        }.get(mime, ".bin" if mime and not mime.startswith("text/") else ".txt")
    return name


async def _store(ctx: ToolContext, data: bytes, name: str, description: str, provenance: dict[str, Any]) -> Artifact:
    if ctx.workspace is None:
        raise InvalidInput("web tools need a workspace to store what they fetch")
    if ctx.cancelled():  # cancelled or past the tool's deadline: nothing is stored
        raise ToolTimeout(
            f"the call was cancelled or passed its deadline; {name!r} was not stored", deadline="cancelled"
        )
    registry = ctx.workspace.artifacts
    artifact, _ = await asyncio.to_thread(
        registry.add_bytes, data, name, description=description, provenance=provenance
    )
    return artifact


def _charset(content_type: str, body: bytes) -> str:
    match = re.search(r"charset=[\"']?([A-Za-z0-9_.:-]+)", content_type, re.IGNORECASE)
    if match:
        name = match.group(1)
    else:
        meta = re.search(rb"<meta[^>]+charset=[\"']?([A-Za-z0-9_.:-]+)", body[:4096], re.IGNORECASE)
        name = meta.group(1).decode("ascii") if meta else "utf-8"
    import codecs

    try:
        return codecs.lookup(name).name
    except LookupError:
        return "utf-8"


# -- search -------------------------------------------------------------------------------------
@tool(
    "builtin:web:search",
    tier=RiskTier.NETWORK,
    description="Search the web through the configured SearXNG endpoint (JSON API). Results are stored as "
    "an artifact for citation.",
    args=WebSearchArgs,
    output_schema=schemas.WEB_SEARCH_OUT,
    registry=TOOLS,
    resources=lambda args: [SearchEndpointUse()],
)
async def search(ctx: ToolContext, args: WebSearchArgs) -> ToolOutput:
    endpoint = ctx.policy.policy.searxng_url
    if not endpoint:
        raise PolicyDenied("no SearXNG endpoint is configured (web.searxng_url)", rule="web.searxng_url")
    base = endpoint.rstrip("/")
    if not base.endswith("/search"):
        base += "/search"
    params: dict[str, Any] = {"q": args.query, "format": "json"}
    for param, value in (("categories", args.categories), ("language", args.language), ("pageno", args.page)):
        if value is not MISSING:
            params[param] = value
    url = f"{base}?{urlencode(params)}"
    fetched = await http_get(ctx, url, max_bytes=ctx.limits.web_max_bytes)
    if fetched.status != 200:
        raise ToolInternalError(
            f"SearXNG answered HTTP {fetched.status}", status=fetched.status, retryable=fetched.status >= 500
        )
    if fetched.truncated:
        raise ToolInternalError("the SearXNG answer exceeded the size limit", retryable=False)
    try:
        payload = json.loads(fetched.body.decode("utf-8"))
        raw_results = payload["results"]
        if not isinstance(raw_results, list):
            raise TypeError("results is not a list")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise ToolInternalError(f"SearXNG did not answer with its JSON format ({exc})") from None
    limit = min(given(args.max_results, ctx.limits.web_search_max_results), ctx.limits.web_search_max_results)
    results = []
    for item in raw_results:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        results.append(
            {
                "title": str(item.get("title") or "")[:500],
                "url": item["url"][:2000],
                "snippet": str(item.get("content") or "")[:2000],
                "engine": str(item.get("engine") or ""),
            }
        )
        if len(results) >= limit:
            break
    stored = json.dumps(
        {"query": args.query, "endpoint": endpoint, "results": results}, indent=2, ensure_ascii=False
    ).encode("utf-8")
    artifact = await _store(
        ctx,
        stored,
        "search-results.json",
        f"web search: {args.query[:100]}",
        {
            "kind": "tool",
            "tool": "builtin:web:search",
            "query": args.query,
            "endpoint": endpoint,
            "url": url,
            "fetched_at": utc_now(),
        },
    )
    found = WebSearchOutput(
        query=args.query,
        endpoint=endpoint,
        results=[WebSearchResult.model_validate(result) for result in results],
        artifact_id=artifact.id,
        citation=f"web:{artifact.id}",
    )
    return ToolOutput.of(
        found,
        {
            "bytes": len(fetched.body),
            "truncated": len(raw_results) > len(results),
            "result_count": len(results),
            "artifacts": [snapshots.link(artifact, "results")],
        },
    )


# -- fetch --------------------------------------------------------------------------------------
def _fetch_resources(args: WebFetchArgs) -> list[Resource]:
    return [UrlUse(args.url)]


def _max_bytes(ctx: ToolContext, args: WebFetchArgs) -> int:
    return min(given(args.max_bytes, ctx.limits.web_max_bytes), ctx.limits.web_max_bytes)


def _preview_fetch(ctx: ToolContext, args: WebFetchArgs) -> dict[str, Any]:
    checked = ctx.policy.check_url(args.url)
    return {"kind": "url", "url": args.url, "host": checked["host"], "max_bytes": _max_bytes(ctx, args)}


@tool(
    "builtin:web:fetch",
    tier=RiskTier.NETWORK,
    description="Fetch a URL (every redirect hop checked by the policy, body capped). The body is stored as "
    "an artifact; the result carries its citation handle.",
    args=WebFetchArgs,
    output_schema=schemas.WEB_FETCH_OUT,
    registry=TOOLS,
    resources=_fetch_resources,
    session_keys=("hosts",),
    preview=_preview_fetch,
)
async def fetch(ctx: ToolContext, args: WebFetchArgs) -> ToolOutput:
    max_bytes = _max_bytes(ctx, args)
    fetched = await http_get(ctx, args.url, max_bytes=max_bytes)
    artifact = await _store(
        ctx,
        fetched.body,
        _artifact_name(fetched.final_url, fetched.content_type),
        f"fetched {fetched.url[:200]}",
        {
            "kind": "tool",
            "tool": "builtin:web:fetch",
            "url": fetched.url,
            "final_url": fetched.final_url,
            "status": fetched.status,
            "content_type": fetched.content_type,
            "truncated": fetched.truncated,
            "fetched_at": utc_now(),
        },
    )
    text = fetched.body[: _PREVIEW_CHARS * 4].decode(_charset(fetched.content_type, fetched.body), errors="replace")
    page = WebFetchOutput(
        url=fetched.url,
        final_url=fetched.final_url,
        status=fetched.status,
        content_type=fetched.content_type,
        bytes=len(fetched.body),
        truncated=fetched.truncated,
        redirects=[WebRedirect.model_validate(hop) for hop in fetched.redirects],
        artifact_id=artifact.id,
        citation=f"web:{artifact.id}",
        preview=text[:_PREVIEW_CHARS],
    )
    return ToolOutput.of(
        page,
        {
            "bytes": len(fetched.body),
            "bytes_read": len(fetched.body),
            "truncated": fetched.truncated,
            "limit": max_bytes,
            "artifacts": [snapshots.link(artifact, "body", url=fetched.final_url)],
        },
    )


__all__ = ["TOOLS", "extract", "fetch", "search"]


# -- extract ------------------------------------------------------------------------------------
@tool(
    "builtin:web:extract",
    tier=RiskTier.READ_ONLY,
    description="Text of a stored artifact (e.g. a fetched page): HTML is converted deterministically. Takes an "
    "artifact id, never a URL.",
    args=WebExtractArgs,
    output_schema=schemas.WEB_EXTRACT_OUT,
    registry=TOOLS,
)
def extract(ctx: ToolContext, args: WebExtractArgs) -> ToolOutput:
    if ctx.workspace is None:
        raise InvalidInput("extract needs a workspace (artifacts live there)")
    ref = args.artifact_id
    if "://" in ref:
        raise InvalidInput("extract takes an artifact id; fetch the URL first with builtin:web:fetch")
    registry = ctx.workspace.artifacts
    artifact = registry.get(ref)
    if artifact.id != ref and artifact.hash.removeprefix("sha256:") != ref.removeprefix("sha256:"):
        raise NotFound(f"no artifact with id {ref!r}")
    data = registry.read_bytes(artifact, limit=ctx.limits.web_max_bytes + 1)
    truncated = len(data) > ctx.limits.web_max_bytes
    data = data[: ctx.limits.web_max_bytes]
    content_type = str(artifact.provenance.get("content_type") or artifact.mime_type)
    if b"\x00" in data[:8192]:
        raise InvalidInput(f"artifact {artifact.id} is binary ({artifact.mime_type}); no text to extract")
    decoded = data.decode(_charset(content_type, data), errors="replace")
    looks_html = "html" in content_type.lower() or re.match(r"\s*(<!doctype html|<html)", decoded[:1000], re.I)
    title, text = html_to_text(decoded) if looks_html else ("", decoded.strip())
    max_chars = given(args.max_chars, ctx.limits.fs_read_max_bytes)
    if len(text) > max_chars:
        text = text[:max_chars]
        truncated = True
    source = artifact.provenance.get("final_url") or artifact.provenance.get("url")
    stem = artifact.name.rsplit(".", 1)[0] or "page"
    stored = snapshots.store(
        ctx,
        text.encode("utf-8"),
        f"{stem}.extract.txt",
        "text",
        description=f"text of artifact {artifact.id}" + (f" ({source[:200]})" if isinstance(source, str) else ""),
        provenance={"source_artifact": artifact.id, "url": source if isinstance(source, str) else None},
        source=artifact.id,
    )
    extracted = WebExtractOutput(
        artifact_id=artifact.id,
        citation=f"web:{artifact.id}",
        title=title,
        text=text,
        chars=len(text),
        truncated=truncated,
        source_url=source if isinstance(source, str) else None,
    )
    return ToolOutput.of(
        extracted,
        {"truncated": truncated, "bytes": len(data), "artifacts": [snapshots.link(artifact, "source"), stored]},
    )
