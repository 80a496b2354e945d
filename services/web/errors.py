"""Typed errors of the web viewer; each carries the HTTP status the API answers with."""

from __future__ import annotations

from typing import Any

from services.errors import AriesError


class ViewerError(AriesError):
    """The viewer cannot start or serve: a non-loopback host, a port in use, a workspace that is missing."""

    code = "viewer_error"
    exit_code = 2
    status = 500


class WebError(AriesError):
    """A refused request; :attr:`status` is the HTTP status, the message the ``error`` of the JSON body."""

    code = "web_error"
    status = 400

    def body(self) -> dict[str, Any]:
        return {"error": self.message, "code": self.code, **self.details}


class BadDocumentId(WebError):
    """An id that is not a document id at all (traversal, an absolute path, a bad URI): nothing is read."""

    code = "bad_document_id"
    status = 400


class DocumentNotFound(WebError):
    """No document with that id (or one outside its root, through a link): nothing is read."""

    code = "document_not_found"
    status = 404


class ReadOnlyDocument(WebError):
    """A document that is shown but never saved (jsonl, xml, txt; a scope or an index that is read-only)."""

    code = "read_only"
    status = 405


class InvalidDocument(WebError):
    """JSON or YAML that does not parse; ``line`` and ``column`` (1-based) say where."""

    code = "invalid_document"
    status = 422


class NotText(WebError):
    code = "not_text"
    status = 415


class DocumentTooLarge(WebError):
    code = "too_large"
    status = 413


class EtagMismatch(WebError):
    """The document changed since it was loaded; ``etag`` is the current one."""

    code = "etag_mismatch"
    status = 412


class PreconditionRequired(WebError):
    code = "precondition_required"
    status = 428


class DocumentLocked(WebError):
    code = "locked"
    status = 423


class ReindexFailed(WebError):
    """The document was saved but its index could not be brought up to date (replayed on next start)."""

    code = "reindex_failed"
    status = 500


class BadRequest(WebError):
    code = "bad_request"
    status = 400
