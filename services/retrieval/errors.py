"""Typed errors of the retrieval service.

Per-file ingest problems subclass :class:`IngestError`; they never abort an ``index add``:
each one becomes an entry of the ingest report, and the other files are indexed.  The
rest are operation errors that the CLI prints as ``aries: <message>`` and the TUI shows
in a notification.
"""

from __future__ import annotations

from services.errors import AriesError, ConfigError, NotFound, TooLarge


class IngestError(AriesError):
    """A file that could not be read; reported per file, the rest of the ingest goes on."""

    code = "ingest_error"


class UnsupportedType(IngestError):
    code = "unsupported_type"


class EncryptedDocument(IngestError):
    """A password-protected PDF (or one whose encryption needs a missing library)."""

    code = "encrypted"


class MalformedDocument(IngestError):
    """A truncated or otherwise broken PDF/EPUB/HTML file, or a loader that crashed on it."""

    code = "malformed"


class UnsafePath(IngestError):
    """A path that would leave the root: an EPUB member or manifest entry, an escaping symlink."""

    code = "unsafe_path"


class BinaryContent(IngestError):
    """Binary data behind a text extension."""

    code = "binary_content"


class EmptyDocument(IngestError):
    code = "empty"


class BadEncoding(IngestError):
    """Text that is not UTF-8 (or UTF-16 with a byte order mark)."""

    code = "bad_encoding"


class NestingTooDeep(IngestError):
    """Pathological nesting (HTML elements, Markdown quotes/lists, PDF object trees)."""

    code = "too_deep"


class FileTooLarge(IngestError, TooLarge):
    """A file over the size limit, or a loader that went over its memory limit."""

    code = "too_large"


class LoaderTimeout(IngestError):
    """A loader that went over its time limit (it is killed)."""

    code = "timeout"


class DuplicateSource(IngestError):
    """A relative path already indexed from another root of the same index."""

    code = "duplicate_source"


LIMIT_CODES = frozenset({FileTooLarge.code, LoaderTimeout.code, NestingTooDeep.code})
"""Codes of the files passed over because they went over a limit of ``LoaderLimits`` (the ingest
report lists them as skipped, with the limit); every other IngestError is a failed file."""

INGEST_ERRORS: dict[str, type[IngestError]] = {
    cls.__name__: cls
    for cls in (
        IngestError,
        UnsupportedType,
        EncryptedDocument,
        MalformedDocument,
        UnsafePath,
        BinaryContent,
        EmptyDocument,
        BadEncoding,
        NestingTooDeep,
        FileTooLarge,
        LoaderTimeout,
        DuplicateSource,
    )
}


class IndexNotFound(NotFound):
    code = "index_not_found"


class HandleNotFound(NotFound):
    code = "handle_not_found"


class NoActiveIndex(AriesError):
    code = "no_active_index"
    exit_code = 2


class IndexBusy(AriesError):
    """Another process (or thread) is writing to the index."""

    code = "index_busy"


class IndexMismatch(ConfigError):
    """An index built with another embedding model than the one configured now."""

    code = "index_mismatch"


class EmbedderError(AriesError):
    """The embedding backend failed (model server down, bad response, model missing)."""

    code = "embedder_error"


class OnnxExportError(EmbedderError):
    """The ONNX encoder could not be prepared (exported into its cache); the message names the fix."""

    code = "onnx_export"


class IndexCorrupt(AriesError):
    code = "index_corrupt"


class VectorStoreDamaged(IndexCorrupt):
    """The index's vector store is damaged or missing: keyword-only until it is rebuilt."""

    code = "vector_store_damaged"


class IndexStorageError(AriesError):
    """The disk is full, read-only or refuses a write to the index; the previous state is kept."""

    code = "index_storage"


class VectorStoreUnavailable(AriesError):
    """The configured Chroma server cannot be reached (or refused the request)."""

    code = "vector_store_unavailable"
