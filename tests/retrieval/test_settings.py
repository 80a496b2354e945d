"""Retrieval settings: every AXIOMME_* variable's default, a valid value and an invalid one.

A bad value is one ConfigError line naming the variable and what it accepts, from the environment,
from code (construction, ``with_``) and through the CLI (a real subprocess: exit 2, no traceback).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from services.errors import ConfigError
from services.retrieval.settings import (
    DEFAULT_EMBEDDER_BACKEND,
    DEFAULT_HTTP_ENDPOINT,
    DEFAULT_HTTP_MODEL,
    DEFAULT_HTTP_TIMEOUT_MS,
    ENV_VARS,
    FusionSettings,
    LoaderLimits,
    RetrievalSettings,
)

# (variable, field, default, [(raw value, parsed value)], [(bad raw value, words the error must contain)])
VARIABLES: list[tuple[str, str, Any, list[tuple[str, Any]], list[tuple[str, list[str]]]]] = [
    (
        "AXIOMME_RETRIEVAL_BACKEND",
        "backend",
        "sqlite",
        [("sqlite", "sqlite"), ("memory", "memory"), (" MEMORY ", "memory")],
        [("postgres", ["'postgres'", "sqlite, memory"]), ("sql lite", ["sqlite, memory"])],
    ),
    (
        "AXIOMME_EMBEDDER",
        "embedder",
        "sentence-transformers",
        [
            ("hash", "hash"),
            ("Semantic-Model-HTTP", "semantic-model-http"),
            ("sentence-transformers", "sentence-transformers"),
            (" Semantic-Lite ", "semantic-lite"),
        ],
        [
            ("bert", ["'bert'", "sentence-transformers, semantic-lite, hash, semantic-model-http"]),
            ("semantic_lite", ["'semantic_lite'"]),
        ],
    ),
    (
        "AXIOMME_EMBEDDER_STRICT",
        "embedder_strict",
        False,
        [
            ("1", True),
            ("true", True),
            (" YES ", True),
            ("On", True),
            ("0", False),
            ("false", False),
            ("no", False),
            ("OFF", False),
        ],
        [("maybe", ["'maybe'", "1, true, yes or on"]), ("2", ["'2'"]), ("enabled", ["'enabled'"])],
    ),
    (
        "AXIOMME_EMBEDDER_BACKEND",
        "embedder_backend",
        DEFAULT_EMBEDDER_BACKEND,
        [("torch", "torch"), ("ONNX", "onnx"), (" onnx-int8 ", "onnx-int8")],
        [("onnx-fp16", ["'onnx-fp16'", "torch, onnx, onnx-int8"]), ("int8", ["torch, onnx, onnx-int8"])],
    ),
    (
        "AXIOMME_EMBEDDER_CACHE",
        "embedder_cache",
        None,
        [("/tmp/onnx", "/tmp/onnx")],
        [],  # any non-empty path; empty means unset
    ),
    (
        "AXIOMME_EMBEDDER_MODEL_ENDPOINT",
        "http_endpoint",
        DEFAULT_HTTP_ENDPOINT,
        [("http://localhost:8080/api/embed", "http://localhost:8080/api/embed")],
        [],  # a non-loopback endpoint is refused when the HTTP embedder is created (test_embedders)
    ),
    (
        "AXIOMME_EMBEDDER_MODEL_NAME",
        "http_model",
        DEFAULT_HTTP_MODEL,
        [("all-minilm", "all-minilm")],
        [],  # any non-empty name is a name; empty means unset
    ),
    (
        "AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS",
        "http_timeout_ms",
        DEFAULT_HTTP_TIMEOUT_MS,
        [("1", 1), (" 250 ", 250)],
        [("0", ["at least 1"]), ("-5", ["at least 1"]), ("1.5", ["'1.5'", "whole number"]), ("soon", ["'soon'"])],
    ),
    (
        "AXIOMME_EMBEDDER_THREADS",
        "threads",
        None,
        [("1", 1), ("4", 4)],
        [("two", ["'two'", "whole number, at least 1"]), ("0", ["at least 1"])],
    ),
    (
        "AXIOMME_CHROMA_URL",
        "chroma_url",
        None,
        [("http://127.0.0.1:8000", "http://127.0.0.1:8000"), ("https://chroma.internal", "https://chroma.internal")],
        [
            ("ftp://host:1", ["'ftp://host:1'", "http://host:port"]),
            ("http://host:1/path", ["scheme, host and port"]),
            ("http://host:port", ["bad port"]),
        ],
    ),
]


def test_every_variable_is_covered() -> None:
    assert {v for v, *_ in VARIABLES} == {env for env, _ in ENV_VARS.values()}


def test_spec_defaults_of_semantic_model_http() -> None:
    """FR-010: the endpoint, model and timeout defaults of ``semantic-model-http``."""
    assert DEFAULT_HTTP_ENDPOINT == "http://127.0.0.1:11434/api/embeddings"
    assert DEFAULT_HTTP_MODEL == "nomic-embed-text" and DEFAULT_HTTP_TIMEOUT_MS == 3000
    assert RetrievalSettings().embedder == "sentence-transformers"  # issue 13 keeps the default


def test_process_environment_knows_the_new_values() -> None:
    """``services.settings.env`` (the typed view of every variable) accepts and refuses alike."""
    from services.settings.env import env_settings

    assert env_settings({"AXIOMME_EMBEDDER": "Semantic-Lite"}).embedder == "semantic-lite"
    assert env_settings({"AXIOMME_EMBEDDER_STRICT": "on"}).embedder_strict == "on"
    with pytest.raises(ConfigError, match="AXIOMME_EMBEDDER_STRICT='maybe'"):
        env_settings({"AXIOMME_EMBEDDER_STRICT": "maybe"})


@pytest.mark.parametrize(("variable", "field", "default"), [row[:3] for row in VARIABLES])
def test_default(variable: str, field: str, default: Any) -> None:
    assert getattr(RetrievalSettings.from_env({}), field) == default
    assert getattr(RetrievalSettings.from_env({variable: ""}), field) == default  # empty = unset
    assert getattr(RetrievalSettings.from_env({variable: "   "}), field) == default
    assert getattr(RetrievalSettings(), field) == default


@pytest.mark.parametrize(
    ("variable", "field", "raw", "parsed"),
    [(row[0], row[1], raw, parsed) for row in VARIABLES for raw, parsed in row[3]],
)
def test_valid_value(variable: str, field: str, raw: str, parsed: Any) -> None:
    settings = RetrievalSettings.from_env({variable: raw})
    assert getattr(settings, field) == parsed
    others = {f: getattr(RetrievalSettings(), f) for f in ENV_VARS if f != field}
    assert {f: getattr(settings, f) for f in others} == others  # nothing else moved


@pytest.mark.parametrize(
    ("variable", "raw", "words"),
    [(row[0], raw, words) for row in VARIABLES for raw, words in row[4]],
)
def test_invalid_value(variable: str, raw: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        RetrievalSettings.from_env({variable: raw})
    message = caught.value.message
    assert message.startswith(f"{variable}=") and "\n" not in message, message
    for word in words:
        assert word in message, message
    assert caught.value.details["setting"] == variable


def test_environment_is_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AXIOMME_EMBEDDER", "hash")
    monkeypatch.setenv("AXIOMME_EMBEDDER_THREADS", "3")
    settings = RetrievalSettings.from_env()
    assert settings.embedder == "hash" and settings.threads == 3


def test_overrides_win_and_none_overrides_are_ignored() -> None:
    env = {"AXIOMME_RETRIEVAL_BACKEND": "memory", "AXIOMME_CHROMA_URL": "http://h:9"}
    settings = RetrievalSettings.from_env(env, backend="sqlite", chroma_url=None, top_n=5)
    assert (settings.backend, settings.chroma_url, settings.top_n) == ("sqlite", "http://h:9", 5)
    with pytest.raises(ConfigError, match="AXIOMME_RETRIEVAL_BACKEND='nope'"):
        RetrievalSettings.from_env({}, backend="nope")


# -- from code: construction and with_ are validated the same way --------------------------------
@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"backend": "redis"}, "AXIOMME_RETRIEVAL_BACKEND='redis' is not supported; use one of: sqlite, memory"),
        ({"embedder": "HASH"}, "AXIOMME_EMBEDDER='HASH' is not supported"),
        ({"threads": 0}, "AXIOMME_EMBEDDER_THREADS=0 is not supported; use a whole number, at least 1"),
        ({"threads": "2"}, "AXIOMME_EMBEDDER_THREADS='2' is not supported"),
        ({"http_timeout_ms": 1.5}, "AXIOMME_EMBEDDER_MODEL_TIMEOUT_MS=1.5"),
        ({"http_model": ""}, "AXIOMME_EMBEDDER_MODEL_NAME='' is not supported"),
        ({"chroma_url": "ftp://x"}, "AXIOMME_CHROMA_URL='ftp://x': expected http://host:port"),
        ({"top_n": 0}, "retrieval setting top_n: "),
        ({"colour": "red"}, "retrieval setting colour: "),
    ],
)
def test_construction_is_validated(kwargs: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RetrievalSettings(**kwargs)
    assert caught.value.message.startswith(expected), caught.value.message


def test_with_validates_and_keeps_the_rest() -> None:
    base = RetrievalSettings.from_env({"AXIOMME_EMBEDDER": "hash"})
    changed = base.with_(chroma_url="http://127.0.0.1:8000")
    assert changed.chroma_url == "http://127.0.0.1:8000" and changed.embedder == "hash"
    assert base.chroma_url is None  # frozen: a copy
    with pytest.raises(ConfigError, match="AXIOMME_CHROMA_URL"):
        base.with_(chroma_url="http://host:1/path")
    with pytest.raises(ConfigError, match="AXIOMME_RETRIEVAL_BACKEND"):
        base.with_(backend="disk")
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.backend = "memory"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("factory", "expected"),
    [
        (lambda: FusionSettings(method="max"), "fusion setting method: "),
        (lambda: FusionSettings(rrf_k=0), "fusion setting rrf_k: "),
        (lambda: FusionSettings(bm25_weight=-1), "fusion setting bm25_weight: "),
        (lambda: FusionSettings(dense_weight=float("nan")), "fusion setting dense_weight: "),
        (lambda: LoaderLimits(max_file_bytes=0), "loader setting max_file_bytes: "),
        (lambda: LoaderLimits(timeout_s=0), "loader setting timeout_s: "),
        (lambda: LoaderLimits(max_zip_members="many"), "loader setting max_zip_members: "),
    ],
)
def test_nested_settings_are_validated(factory: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        factory()
    assert caught.value.message.startswith(expected) and "\n" not in caught.value.message


def test_nested_settings_still_work_as_dataclasses() -> None:
    """The loader sandbox ships limits as asdict() JSON; the engine audits asdict(fusion)."""
    limits = LoaderLimits(timeout_s=0.05, memory_bytes=48 << 20)
    assert LoaderLimits(**dataclasses.asdict(limits)) == limits
    assert dataclasses.asdict(FusionSettings()) == {
        "method": "rrf",
        "rrf_k": 20.0,
        "bm25_weight": 1.0,
        "dense_weight": 1.0,
    }
    settings = RetrievalSettings(fusion=FusionSettings(rrf_k=60), limits=limits)
    assert settings.fusion.rrf_k == 60.0 and settings.limits.timeout_s == 0.05
    assert hash(settings) == hash(RetrievalSettings(fusion=FusionSettings(rrf_k=60), limits=limits))


def test_every_field_is_documented() -> None:
    from pydantic import TypeAdapter

    for cls in (RetrievalSettings, FusionSettings, LoaderLimits):
        schema = TypeAdapter(cls).json_schema()
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{cls.__name__}.{name} has no docstring"


# -- through the CLI: one line, exit 2, no traceback ------------------------------------------------
@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("AXIOMME_RETRIEVAL_BACKEND", "redis"),
        ("AXIOMME_EMBEDDER_THREADS", "two"),
        ("AXIOMME_CHROMA_URL", "ftp://x"),
        ("AXIOMME_EMBEDDER_STRICT", "maybe"),
    ],
)
def test_cli_reports_a_bad_variable_in_one_line(variable: str, raw: str, tmp_path: Path) -> None:
    env = {**os.environ, "ARIES_HOME": str(tmp_path), variable: raw}
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "rag", "index", "list"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"aries: {variable}={raw!r}"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
