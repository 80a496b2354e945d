"""The aiohttp application of the viewer: the page, the JSON API, and the checks every request passes.

Every response carries :data:`SECURITY_HEADERS` (``/api`` ones also ``Cache-Control: no-store``).
Every request must name this server in ``Host`` (``127.0.0.1:PORT``, ``localhost:PORT`` or
``[::1]:PORT``: a page of another site that rebinds its DNS name to 127.0.0.1 sends its own name and
gets 403) and, when it sends ``Origin``, come from this same origin (403 otherwise).  ``/api/`` requests
must carry the per-start token in ``X-Aries-Token`` (401 otherwise).  Request bodies are capped at
:data:`MAX_BODY_BYTES` (413).

Saving a document holds it in :attr:`ViewerState.saving` from the etag check to the end of the
reindex; a load or save of it meanwhile answers 423 with ``Retry-After: 1``.  Saves run one at a time
on the state's writer thread (the event loop keeps answering); loads and previews on the default pool.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.errors import AriesError
from services.web.documents import (
    EXTRACTED_KINDS,
    MAX_DOCUMENT_BYTES,
    Document,
    DocumentSet,
    etag_of,
    extracted_text,
    validate_content,
)
from services.web.errors import (
    BadRequest,
    DocumentLocked,
    DocumentTooLarge,
    EtagMismatch,
    NotText,
    PreconditionRequired,
    ReindexFailed,
    WebError,
)
from services.web.reqlog import WebRequestLog

if TYPE_CHECKING:
    from aiohttp import web

STATIC_DIR = Path(__file__).resolve().parent / "static"
STATIC_FILES = {"app.css": "text/css", "app.js": "text/javascript"}
MAX_BODY_BYTES = 2 * 1024 * 1024
"""The request body cap (a JSON body ``{"content": ...}``); larger bodies are refused with 413."""
TOKEN_HEADER = "X-Aries-Token"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Permissions-Policy": (
        "camera=(), microphone=(), geolocation=(), payment=(), usb=(), serial=(), "
        "clipboard-read=(), display-capture=(), fullscreen=(self)"
    ),
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@dataclass
class ViewerState:
    documents: DocumentSet
    token: str
    reindex_delay: float = 0.0
    port: int = 0
    log: WebRequestLog | None = None
    saving: set[str] = field(default_factory=set)
    writer: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="aries-web-save")
    )

    def allowed_hosts(self) -> set[str]:
        return {f"127.0.0.1:{self.port}", f"localhost:{self.port}", f"[::1]:{self.port}"}


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    from aiohttp import web

    return web.json_response(data, status=status, headers=headers, dumps=lambda d: json.dumps(d, ensure_ascii=True))


def _error(exc: WebError) -> web.Response:
    headers = {"Retry-After": "1"} if isinstance(exc, DocumentLocked) else None
    return _json(exc.body(), exc.status, headers)


def _quoted(etag: str) -> str:
    return f'"{etag}"'


def _if_match(value: str) -> str:
    value = value.strip()
    if value.startswith("W/"):
        value = value[2:]
    return value.strip('"')


def build_app(state: ViewerState) -> web.Application:
    """The application: its two middlewares (headers outermost, then the guard), the page and the API."""
    from aiohttp import web

    app = web.Application(middlewares=[_headers(), _guard(state)], client_max_size=MAX_BODY_BYTES)
    _add_pages(app)
    api = _Api(state)
    app.router.add_get("/api/tree", api.tree)
    app.router.add_get("/api/doc", api.load)
    app.router.add_put("/api/doc", api.save)
    app.router.add_post("/api/preview", api.preview)
    return app


def _headers() -> Any:
    """The outer middleware: typed errors become their JSON answer; every response gets the
    security headers (``/api`` ones also ``Cache-Control: no-store``)."""
    from aiohttp import web

    @web.middleware
    async def headers(request: web.Request, handler: Any) -> web.StreamResponse:
        api = request.path.startswith("/api/")
        try:
            response: web.StreamResponse = await handler(request)
        except WebError as exc:
            response = _error(exc)
        except web.HTTPException as exc:  # aiohttp's own: 404 route, 405 method, 413 body
            if exc.status < 400:
                raise
            message = "the request body is over the 2 MiB limit" if exc.status == 413 else exc.reason
            response = _json({"error": message}, exc.status)
            if exc.status == 405 and "Allow" in exc.headers:
                response.headers["Allow"] = exc.headers["Allow"]
        response.headers.update(SECURITY_HEADERS)
        if api:
            response.headers["Cache-Control"] = "no-store"
        return response

    return headers


def _guard(state: ViewerState) -> Any:
    """The inner middleware: the Host and Origin checks, then the token and the body cap on ``/api``."""
    from aiohttp import web

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        host = request.headers.get("Host", "").lower()
        if host not in state.allowed_hosts():
            return _json({"error": "forbidden: this server answers only to 127.0.0.1, localhost or [::1]"}, 403)
        origin = request.headers.get("Origin")
        if origin is not None and origin.lower() != f"http://{host}":
            return _json({"error": "forbidden: cross-origin requests are refused"}, 403)
        if request.path.startswith("/api/"):
            given = request.headers.get(TOKEN_HEADER, "")
            if not secrets.compare_digest(given.encode("utf-8", "replace"), state.token.encode("utf-8")):
                return _json({"error": f"unauthorized: the {TOKEN_HEADER} header must carry this server's token"}, 401)
            length = request.content_length
            if length is not None and length > MAX_BODY_BYTES:
                return _json({"error": "the request body is over the 2 MiB limit"}, 413)
        response: web.StreamResponse = await handler(request)
        return response

    return guard


def _add_pages(app: web.Application) -> None:
    """``/`` (the page) and ``/static/{name}`` (its CSS and script), read once."""
    from aiohttp import web

    pages = {name: (STATIC_DIR / name).read_bytes() for name in ("index.html", *STATIC_FILES)}

    async def index(_request: web.Request) -> web.Response:
        return web.Response(body=pages["index.html"], content_type="text/html", charset="utf-8")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound()
        return web.Response(body=pages[name], content_type=STATIC_FILES[name], charset="utf-8")

    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)


class _Api:
    """The JSON API's handlers over one :class:`ViewerState` (each load and save logged)."""

    def __init__(self, state: ViewerState) -> None:
        self.state = state

    async def tree(self, _request: web.Request) -> web.Response:
        loop = asyncio.get_running_loop()
        documents = await loop.run_in_executor(None, self.state.documents.documents)
        return _json({"documents": [doc.to_dict() for doc in documents]})

    async def resolve(self, request: web.Request) -> Document:
        doc_id = request.query.get("id", "")
        doc = await asyncio.get_running_loop().run_in_executor(None, self.state.documents.resolve, doc_id)
        if doc.id in self.state.saving:
            raise DocumentLocked(f"{doc.path} is being saved and reindexed; try again in a moment")
        return doc

    def log(self, request: web.Request, status: int, started: float, **fields: Any) -> None:
        if self.state.log is None:
            return
        record = {
            "method": request.method,
            "id": request.query.get("id", ""),
            "status": status,
            "save_ms": fields.pop("save_ms", 0.0),
            "reindex_ms": fields.pop("reindex_ms", 0.0),
            "total_ms": round((time.perf_counter() - started) * 1000, 3),
            "content_bytes": fields.pop("content_bytes", 0),
            **fields,
        }
        self.state.log.write(record)

    async def load(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        size = 0
        try:
            doc = await self.resolve(request)
            loop = asyncio.get_running_loop()
            extra: dict[str, Any] = {}
            if doc.kind in EXTRACTED_KINDS:  # PDF, HTML, EPUB: the text their index was built from
                data, segments = await loop.run_in_executor(None, self.state.documents.extracted, doc)
                content, extra = extracted_text(segments), {"segments": segments}
            else:
                data = await loop.run_in_executor(None, self.state.documents.read, doc)
                try:
                    content = data.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise NotText(f"{doc.path} is not UTF-8 text (byte {exc.start})") from None
            size = len(data)
            etag = etag_of(data)
            body = {**doc.to_dict(), "content": content, "etag": etag, **extra}
            response = _json(body, headers={"ETag": _quoted(etag)})
        except WebError as exc:
            self.log(request, exc.status, started, content_bytes=size, error=exc.code)
            raise
        self.log(request, 200, started, content_bytes=size)
        return response

    async def save(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        size = 0
        state = self.state
        try:
            doc = await self.resolve(request)
            state.documents.check_editable(doc)
            expected = request.headers.get("If-Match")
            if expected is None:
                raise PreconditionRequired("a save needs If-Match with the etag of the document as it was loaded")
            content = await _content(request)
            data = content.encode("utf-8")
            size = len(data)
            if size > MAX_DOCUMENT_BYTES:
                raise DocumentTooLarge(f"the document is over the viewer's {MAX_DOCUMENT_BYTES}-byte limit")
            validate_content(doc.kind, content)
            if doc.id in state.saving:  # another save began while this body was read
                raise DocumentLocked(f"{doc.path} is being saved and reindexed; try again in a moment")
            state.saving.add(doc.id)
            try:
                loop = asyncio.get_running_loop()
                timings = await loop.run_in_executor(state.writer, _save_locked, state, doc, data, _if_match(expected))
            finally:
                state.saving.discard(doc.id)
        except WebError as exc:
            self.log(request, exc.status, started, content_bytes=size, error=exc.code)
            raise
        saved, reindexed = timings["save_ms"], timings["reindex_ms"]
        self.log(request, 200, started, content_bytes=size, save_ms=saved, reindex_ms=reindexed)
        total_ms = round((time.perf_counter() - started) * 1000, 3)
        return _json({**timings, "total_ms": total_ms, "bytes": size}, headers={"ETag": _quoted(timings["etag"])})

    async def preview(self, request: web.Request) -> web.Response:
        from services.web.preview import render_markdown

        content = await _content(request)
        html = await asyncio.get_running_loop().run_in_executor(None, render_markdown, content)
        return _json({"html": html})


async def _content(request: web.Request) -> str:
    """The ``content`` string of a JSON body (400 when the body is not that)."""
    raw = await request.read()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise BadRequest('the body must be JSON: {"content": "..."}') from None
    if not isinstance(body, dict) or not isinstance(body.get("content"), str):
        raise BadRequest('the body must be JSON: {"content": "..."}')
    content: str = body["content"]
    return content


def _save_locked(state: ViewerState, doc: Document, data: bytes, expected: str) -> dict[str, Any]:
    """On the writer thread, with ``doc`` held: etag check, atomic write, the test delay, the reindex."""
    from services.files.crashpoints import crash_point

    documents = state.documents
    current = etag_of(documents.read(doc))
    if not secrets.compare_digest(current, expected):
        raise EtagMismatch(
            f"{doc.path} changed since it was loaded (by another tab or program); reload it", etag=current
        )
    began = time.perf_counter()
    documents.write(doc, data)
    save_ms = round((time.perf_counter() - began) * 1000, 3)
    crash_point("ARIES_WEB_SAVE_FAULT", "written")
    if state.reindex_delay > 0:
        time.sleep(state.reindex_delay)
    began = time.perf_counter()
    etag = etag_of(data)
    try:
        reindex = documents.reindex(doc)
    except ReindexFailed as exc:
        exc.details["etag"] = etag
        raise
    except AriesError as exc:
        raise ReindexFailed(f"saved, but the reindex failed: {exc.message}", etag=etag) from None
    reindex_ms = round((time.perf_counter() - began) * 1000, 3)
    return {"etag": etag, "save_ms": save_ms, "reindex_ms": reindex_ms, "reindex": reindex}
