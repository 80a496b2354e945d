"""``aries rag …`` and ``aries eval rag …`` (app.cli.rag) through ``app.cli.main``, in this process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from services.workspace.manager import WorkspaceManager

pytestmark = pytest.mark.timeout(120)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``aries ARGV`` in this process: the real parser and error exits of ``app.cli.main``."""
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def named_workspace() -> str:
    WorkspaceManager().create("cli")
    return "cli"


def test_rag_lifecycle(named_workspace: str, docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = ["-w", named_workspace]
    code, out, err = run([*ws, "rag", "index", "add", str(docs)], capsys)
    assert code == 0, err
    assert "index 'docs': 3 added" in out and "now the active index" in out

    code, out, _ = run([*ws, "rag", "index", "list", "--json"], capsys)
    listed = json.loads(out)
    assert code == 0 and listed[0]["name"] == "docs" and listed[0]["active"] and listed[0]["files"] == 3

    code, out, _ = run([*ws, "rag", "query", "cats", "purr", "-k", "2", "--json"], capsys)
    result = json.loads(out)
    assert code == 0 and result["query"] == "cats purr" and len(result["hits"]) == 2
    handle = result["hits"][0]["handle"]
    assert result["hits"][0]["source_path"] == "cats.md"

    code, out, _ = run([*ws, "rag", "query", "cats", "purr"], capsys)
    assert code == 0 and handle in out and "bm25 #1" in out

    code, out, _ = run([*ws, "rag", "show", handle], capsys)
    assert code == 0 and out.startswith(handle) and "Cats purr when they are content." in out

    code, out, _ = run([*ws, "rag", "last", "--json"], capsys)
    assert code == 0 and json.loads(out)["hits"][0]["handle"] == handle

    code, out, _ = run([*ws, "rag", "last"], capsys)
    assert code == 0 and "query   cats purr" in out

    code, out, err = run([*ws, "rag", "index", "use", "nope"], capsys)
    assert code == 1 and err == "aries: no index named 'nope'; see: rag index list\n"

    code, out, _ = run([*ws, "rag", "index", "drop", "docs"], capsys)
    assert code == 0 and "dropped" in out
    code, out, err = run([*ws, "rag", "query", "cats"], capsys)
    assert code == 2 and err.startswith("aries: no active index")


def test_errors_become_one_line_and_an_exit_code(
    named_workspace: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, _, err = run(["-w", named_workspace, "rag", "show", "garbage"], capsys)
    assert code == 2 and err.startswith("aries: 'garbage' is not a citation handle")
    code, _, err = run(["-w", "missing", "rag", "index", "list"], capsys)
    assert code == 1 and "no workspace named 'missing'" in err
    code, _, err = run(["-w", named_workspace, "rag", "index", "add", str(tmp_path / "nowhere")], capsys)
    assert code == 1 and err.startswith("aries: ") and "no such file" in err
    monkeypatch.setenv("AXIOMME_RETRIEVAL_BACKEND", "redis")
    code, _, err = run(["-w", named_workspace, "rag", "index", "list"], capsys)
    assert code == 2 and "AXIOMME_RETRIEVAL_BACKEND='redis'" in err


def test_without_a_workspace_nothing_persists(docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["rag", "index", "add", str(docs), "--json"], capsys)
    assert code == 0
    assert "ephemeral workspace; the index will not persist" in err
    assert json.loads(out)["added"] == ["cats.md", "guides/install.md", "notes.txt"]
    code, _, err = run(["rag", "query", "cats"], capsys)
    assert code == 2 and "no active index" in err


def _beir(root: Path) -> Path:
    root.mkdir()
    docs = {
        "d1": ("Aspirin and stroke", "Aspirin lowers the risk of a second stroke."),
        "d2": ("Statins", "Statins lower LDL cholesterol in adults."),
        "d3": ("Owls", "Owls hunt small mammals at night."),
        "d4": ("Vitamin D", "Vitamin D supplements and bone density in older women."),
    }
    (root / "corpus.jsonl").write_text(
        "".join(json.dumps({"_id": k, "title": t, "text": x}) + "\n" for k, (t, x) in docs.items()), encoding="utf-8"
    )
    queries = {"q1": "does aspirin prevent strokes", "q2": "cholesterol drugs", "q3": "nocturnal birds of prey"}
    (root / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in queries.items()), encoding="utf-8"
    )
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\nq3\td3\t1\n", encoding="utf-8")
    return root


def test_eval_rag_json_shape_and_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = _beir(tmp_path / "beir")
    argv = ["eval", "rag", "--dataset", str(dataset), "--json", "--cache", str(tmp_path / "cache")]
    code, out, _ = run(argv, capsys)
    assert code == 0
    result = json.loads(out)
    assert set(result) == {
        "queries",
        "methods",
        "ann_recall@100",
        "documents",
        "missing_judged",
        "timings",
        "dataset",
        "environment",
        "problems",
        "ok",
    }
    assert result["queries"] == 3 and result["documents"] == 4 and result["problems"] == []
    assert result["ok"] is True and result["environment"]["embedding_provider"] == "hash"
    assert result["environment"]["embedding_strict_error"] is None
    assert set(result["methods"]) == {"bm25", "dense", "hybrid"}
    for values in result["methods"].values():
        assert set(values) == {"ndcg@10", "recall@10", "recall@100", "mrr@10", "p@10"}
    assert result["methods"]["bm25"]["recall@10"] == 0.6667  # "nocturnal birds of prey" shares no term with d3
    assert result["methods"]["dense"]["recall@10"] == 1.0  # dense ranks all four documents
    cached = [p for p in (tmp_path / "cache").iterdir() if p.name != ".locks"]  # .locks: the index locks
    assert len(cached) == 1
    stamp = (cached[0] / "manifest.db").stat().st_mtime_ns
    code, again, _ = run(argv, capsys)
    again_result = json.loads(again)
    assert code == 0 and again_result.pop("timings") and result.pop("timings") and again_result == result
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [".locks", cached[0].name]
    assert (cached[0] / "manifest.db").stat().st_mtime_ns == stamp  # reused, not rebuilt

    code, out, _ = run(["eval", "rag", "--dataset", str(dataset), "--cache", str(tmp_path / "cache")], capsys)
    assert code == 0 and "hybrid" in out and "ndcg@10" in out


def test_eval_rag_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["eval", "rag", "--dataset", str(tmp_path / "missing"), "--json"], capsys)
    assert code == 1 and err.startswith("aries: ") and "no such dataset" in err
    dataset = _beir(tmp_path / "beir")
    (dataset / "queries.jsonl").write_text('{"_id": "q1", "text": "ok"}\nnot json\n', encoding="utf-8")
    code, _, err = run(["eval", "rag", "--dataset", str(dataset), "--json"], capsys)
    assert code == 1 and "queries.jsonl:2" in err
    dataset = _beir(tmp_path / "beir2")
    code, _, err = run(["eval", "rag", "--dataset", str(dataset), "--qrels", str(dataset / "none.tsv")], capsys)
    assert code == 1 and "none.tsv" in err


def test_index_add_lists_every_file_with_its_reason_and_exits_3(
    named_workspace: str, docs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One bad file never stops the others; each file is named; exit code 3 says some were not indexed."""
    ws = ["-w", named_workspace]
    code, out, err = run([*ws, "rag", "index", "add", str(docs)], capsys)
    assert code == 0, err
    assert "  added    cats.md" in out and "  added    guides/install.md" in out and "  added    notes.txt" in out

    (docs / "deep.html").write_text("<div>" * 1000, encoding="utf-8")
    (docs / "bad.txt").write_bytes(b"caf\xe9")
    (docs / "big.md").write_text("# Big\n\n" + "word " * 400, encoding="utf-8")
    (docs / "cats.md").write_text("# Cats\n\nCats sleep in the sun.\n", encoding="utf-8")
    (docs / "notes.txt").unlink()
    (docs / "image.png").write_bytes(b"\x89PNG")
    monkeypatch.setenv("AXIOMME_LOADER_MAX_TEXT_CHARS", "1000")
    code, out, err = run([*ws, "rag", "index", "add", str(docs)], capsys)
    assert code == 3, (out, err)
    lines = out.splitlines()
    assert "  updated  cats.md" in lines and "  removed  notes.txt" in lines
    assert any(line.startswith("  failed   bad.txt: [bad_encoding] not valid UTF-8") for line in lines), out
    assert any(line.startswith("  skipped  deep.html: [too_deep] ") for line in lines), out
    big = "  skipped  big.md: [too_large] the file has more than 1000 characters of text (limits.max_text_chars)"
    assert big in lines, out
    assert any(line.startswith("  skipped  image.png: [unsupported_type]") for line in lines), out
    assert "3 file(s) not indexed (exit code 3)" in err

    code, out, _ = run([*ws, "rag", "index", "add", str(docs), "--json"], capsys)
    report = json.loads(out)
    assert code == 3 and report["status"] == "incomplete" and report["exit_code"] == 3
    assert {i["path"]: i["code"] for i in report["skipped"]} == {
        "image.png": "unsupported_type",
        "deep.html": "too_deep",
        "big.md": "too_large",
    }
    assert [i["path"] for i in report["errors"]] == ["bad.txt"]
