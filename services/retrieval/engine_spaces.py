"""Which embedder serves which index: the vector spaces of an engine.

With ``AXIOMME_EMBEDDER_BACKEND`` set (or an embedder passed in, or an embedder other than
``sentence-transformers``), one embedder serves every index, strictly: an index whose vectors were
made in another space is an :class:`~services.retrieval.errors.IndexMismatch` ("rebuild needed").

Unset, it is *auto* (:func:`~services.retrieval.embedders.follows_index`): a new index is built
with the default embedder (``onnx``, fp32), and an existing all-MiniLM-L6-v2 index is read and
updated in the space it records — ``onnx`` (fp32) for unquantized vectors (torch's, fp32 ONNX's,
or an index from before backends were recorded: the same vectors to ~2e-7, and no torch import),
``onnx-int8`` for int8 ones.  So switching the default never makes an existing index say
"rebuild needed".
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from services.retrieval.embedders import (
    MINILM_ID,
    Embedder,
    backend_for_space,
    backend_of,
    create_embedder,
    create_minilm,
    follows_index,
)
from services.retrieval.errors import IndexMismatch
from services.retrieval.settings import RetrievalSettings

if TYPE_CHECKING:
    from services.retrieval.store import IndexStore

SPACE_KEYS = ("embedding_model", "embedding_backend", "embedding_quantization")
"""The index meta keys that say which vector space an index is in."""


class VectorSpaces:
    """The embedders of one engine, one per backend, and the check that an index can be served."""

    def __init__(self, settings: RetrievalSettings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.default: Embedder = embedder or create_embedder(settings)
        """The embedder of new indexes (and of every index unless :attr:`follows`)."""
        self.follows = embedder is None and follows_index(settings)
        """*Auto*: each existing all-MiniLM-L6-v2 index is served in its recorded space."""
        self._embedders: dict[str, Embedder] = {backend_of(self.default)[0]: self.default}
        self._lock = threading.Lock()

    def backend_for(self, built_with: str | None, quantization: str | None) -> str:
        """The backend for an index built with model ``built_with`` in ``quantization``.

        *Auto*: an all-MiniLM-L6-v2 index gets its space's own (``onnx`` / ``onnx-int8``); a new
        index, or one of another model (refused by :meth:`check`), the default.  Otherwise always
        the default.
        """
        if self.follows and built_with == MINILM_ID:
            return backend_for_space(quantization)
        return backend_of(self.default)[0]

    def embedder_for(self, store: IndexStore) -> Embedder:
        """The embedder for ``store``'s vectors (see :meth:`backend_for`); created once per backend."""
        backend = self.backend_for(
            store.manifest.get_meta("embedding_model"), store.manifest.get_meta("embedding_quantization")
        )
        with self._lock:
            embedder = self._embedders.get(backend)
            if embedder is None:
                embedder = self._embedders[backend] = create_minilm(backend, self.settings)
            return embedder

    def check(self, store: IndexStore, *, record: bool = False) -> Embedder:
        """The embedder for ``store``, after refusing an index whose vectors it cannot be compared
        with; ``record`` (writers) notes the model, backend and quantization in an index that has
        none yet.

        Indexes written before the backend was recorded hold torch (unquantized) vectors.  torch
        and fp32 ONNX share a vector space; an int8 index takes int8 vectors only, and the other
        way round: anything else is an :class:`IndexMismatch` saying a rebuild is needed (with an
        explicit ``AXIOMME_EMBEDDER_BACKEND``; *auto* picks the backend of the index's space).
        """
        embedder = self.embedder_for(store)
        built_with = store.manifest.get_meta("embedding_model")
        if built_with is not None and built_with != embedder.model_id:
            raise IndexMismatch(
                f"index {store.name!r} was built with {built_with}, but the embedder now is {embedder.model_id}; "
                f"set AXIOMME_EMBEDDER to match, or drop and re-add the index",
                index=store.name,
            )
        backend, quantization = backend_of(embedder)
        built_backend = store.manifest.get_meta("embedding_backend")
        built_quantization = store.manifest.get_meta("embedding_quantization")
        if built_with is not None and (built_quantization or "none") != quantization:
            was = built_backend or "torch"
            raise IndexMismatch(
                f"index {store.name!r} holds {was} vectors (quantization {built_quantization or 'none'}), but the "
                f"embedder now is {backend} (quantization {quantization}): rebuild needed — drop and re-add the "
                f"index, or set AXIOMME_EMBEDDER_BACKEND={was} (or unset it: each index is then read in its own "
                f"space)",
                index=store.name,
            )
        if record and (built_with is None or built_backend is None):
            store.manifest.set_meta(
                embedding_model=embedder.model_id, embedding_backend=backend, embedding_quantization=quantization
            )
        return embedder

    def describe(self, built_with: Any, built_backend: Any, quantization: Any) -> dict[str, str | None]:
        """``embedding_backend`` (what serves the index now) and ``built_backend`` (what it records)
        for :class:`~services.retrieval.models.IndexInfo`."""
        if built_with is None:  # nothing written yet: the next ingest records the default's
            return {"embedding_backend": backend_of(self.default)[0], "built_backend": None}
        built = built_backend or ("torch" if built_with == MINILM_ID else None)
        return {"embedding_backend": self.backend_for(built_with, quantization), "built_backend": built}
