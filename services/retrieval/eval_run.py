"""An evaluation or benchmark *run*: its metrics, its run environment, and the release-profile gate.

The **run environment** says which embedder produced the figures::

    {"embedding_provider": "semantic-model-http",      # AXIOMME_EMBEDDER
     "embedding_model": "semantic-model-http:nomic-embed-text",
     "embedding_backend": "http", "embedding_strict": true,
     "embedding_strict_error": null}                    # the error text of a strict-mode failure

``AXIOMME_EMBEDDER_STRICT`` (spec FR-010): in strict mode a model failure during the run does not
vanish into a traceback — the run is still written, with ``embedding_strict_error`` set to the
error's one-line text and no metrics, and :func:`evaluate_run` reports it as failed.  Without strict
mode a model failure is the typed :class:`~services.retrieval.errors.EmbedderError` it always was.

The record also says what was measured and how long it took: ``dataset`` (path, SHA-256 of the
corpus, queries and qrels, and of each file), ``documents``, ``queries``, ``missing_judged`` and
``timings`` (load, index, queries, total seconds).  ``problems`` lists, one line each, why a run is
not ``ok`` apart from the gate: a strict-mode embedder failure, or judged documents missing from
the corpus above :data:`~services.retrieval.evaluation.MISSING_JUDGED_MAX` of the judgments.

A **release-profile gate** (``gate_profile`` containing ``release``, or ``write_release_check``)
fails unless the provider is ``semantic-model-http`` and no strict error was recorded; its report
carries the embedding diagnostics (``embedding_provider``, ``embedding_strict_error``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.retrieval.chunking import ChunkConfig
from services.retrieval.embedders import Embedder, backend_of, create_embedder
from services.retrieval.errors import EmbedderError
from services.retrieval.settings import RetrievalSettings

RELEASE_PROVIDER = "semantic-model-http"
"""The only embedding provider a release-profile gate accepts (a semantic model backend)."""


def run_environment(
    settings: RetrievalSettings, embedder: Embedder | None = None, *, strict_error: str | None = None
) -> dict[str, Any]:
    """The embedding part of a run's environment (see the module docstring)."""
    backend = backend_of(embedder)[0] if embedder is not None else None
    return {
        "embedding_provider": settings.embedder,
        "embedding_model": embedder.model_id if embedder is not None else None,
        "embedding_backend": backend,
        "embedding_strict": settings.embedder_strict,
        "embedding_strict_error": strict_error,
    }


def is_release_profile(gate_profile: str | None, write_release_check: bool = False) -> bool:
    return write_release_check or (gate_profile is not None and "release" in gate_profile.lower())


def release_gate(
    environment: dict[str, Any], gate_profile: str | None, *, write_release_check: bool = False
) -> dict[str, Any]:
    """The gate's verdict: ``{"gate_profile", "release", "passed", "reasons", ...diagnostics}``.

    Only a release profile checks the embedding policy; any other profile passes (its reasons empty).
    """
    release = is_release_profile(gate_profile, write_release_check)
    reasons: list[str] = []
    provider = environment.get("embedding_provider")
    error = environment.get("embedding_strict_error")
    if release and provider != RELEASE_PROVIDER:
        reasons.append(f"embedding_provider is {provider!r}; a release profile requires {RELEASE_PROVIDER!r}")
    if release and error:
        reasons.append(f"embedding_strict_error: {error}")
    report: dict[str, Any] = {
        "gate_profile": gate_profile,
        "release": release,
        "passed": not reasons,
        "reasons": reasons,
    }
    if reasons:  # what the embedding policy saw, beside its verdict
        report["embedding_provider"] = provider
        report["embedding_strict_error"] = error
    return report


def evaluate_run(
    dataset: Path,
    *,
    settings: RetrievalSettings | None = None,
    embedder: Embedder | None = None,
    gate_profile: str | None = None,
    write_release_check: bool = False,
    queries_file: Path | None = None,
    qrels_file: Path | None = None,
    limit_docs: int | None = None,
    cache_dir: Path | None = None,
    chunk_config: ChunkConfig | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """:func:`~services.retrieval.evaluation.evaluate` as a run record.

    ``{"queries", "methods", "documents", "missing_judged", "timings", "dataset", "environment",
    "problems", "ok"[, "gate"]}``: ``ok`` is False when a strict-mode model failure was recorded,
    too many judged documents are missing from the corpus, or the gate failed.  Raises the typed
    error of a model failure when strict mode is off, and ConfigError / NotFound / CorruptFile for bad settings or data.
    """
    from services.retrieval.evaluation import MISSING_JUDGED_MAX, dataset_fingerprint, evaluate

    began = time.perf_counter()
    settings = settings or RetrievalSettings.from_env()
    embedder = embedder or create_embedder(settings)
    record: dict[str, Any] = {"queries": 0, "methods": {}}
    strict_error: str | None = None
    try:
        record = evaluate(
            dataset,
            queries_file=queries_file,
            qrels_file=qrels_file,
            limit_docs=limit_docs,
            cache_dir=cache_dir,
            settings=settings,
            embedder=embedder,
            chunk_config=chunk_config,
            progress=progress,
        )
    except EmbedderError as exc:
        if not settings.embedder_strict:
            raise
        strict_error = exc.message
    record["dataset"] = dataset_fingerprint(dataset, queries_file, qrels_file)
    record.setdefault("timings", {})["total_s"] = round(time.perf_counter() - began, 3)
    record["environment"] = run_environment(settings, embedder, strict_error=strict_error)
    problems: list[str] = []
    if strict_error is not None:
        problems.append(f"AXIOMME_EMBEDDER_STRICT: the embedder failed: {strict_error}")
    missing = record.get("missing_judged") or {}
    if missing.get("count") and missing.get("share", 0.0) > MISSING_JUDGED_MAX:
        problems.append(
            f"{missing['count']} of {missing['judgments']} judged documents are missing from the corpus "
            f"({missing['share']:.1%}, over the {MISSING_JUDGED_MAX:.0%} allowed): they count as relevant and "
            "not found; check that the qrels belong to this corpus"
        )
    record["problems"] = problems
    ok = not problems
    if gate_profile is not None or write_release_check:
        gate = release_gate(record["environment"], gate_profile, write_release_check=write_release_check)
        record["gate"] = gate
        ok = ok and bool(gate["passed"])
    record["ok"] = ok
    return record


__all__ = ["RELEASE_PROVIDER", "evaluate_run", "is_release_profile", "release_gate", "run_environment"]
