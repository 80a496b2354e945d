"""Reproduce (or rule out) index damage from `aries rag query` running beside `aries rag index add`.

    python bench/concurrent_rag.py [--rounds N] [--files N]

Each round: a CLI ingest of a growing corpus into one index in a fresh workspace, while two
CLI query loops run against the same index; afterwards a fresh process opens the index,
queries it and compares the stores.  Exit code 1 and a line per failure when anything broke.
Uses the deterministic hash embedder, a temporary ARIES_HOME, and no network.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(os.environ.get("ARIES_REPO") or Path(__file__).resolve().parents[1])
"""The checkout to run (``ARIES_REPO=/path/to/other/checkout`` runs that code instead)."""

CHECK = r"""
import json
from services.workspace.manager import WorkspaceManager
from services.retrieval import RetrievalEngine
ws, _ = WorkspaceManager().open("rw")
with RetrievalEngine(ws) as engine:
    store = engine.indexes.store("docs")
    manifest = set(store.manifest.chunk_ids())
    chroma = set(store.vectors.get(include=[])["ids"])
    searcher = store.lexical.searcher()
    hits = engine.query("herons egrets", k=5).hits
    print(json.dumps({"manifest": len(manifest), "chroma": len(chroma), "tantivy": searcher.num_docs,
                      "chroma_extra": len(chroma - manifest), "chroma_missing": len(manifest - chroma),
                      "hits": len(hits)}))
"""


def _env(home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(ARIES_HOME=str(home), AXIOMME_EMBEDDER="hash", PYTHONPATH=str(REPO))
    return env


def _aries(*args: str) -> list[str]:
    return [sys.executable, "-m", "app.cli", "-w", "rw", *args]


def _corpus(root: Path, files: int, round_: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        words = " ".join(f"Sentence {j} of document {i} round {round_} about herons and egrets." for j in range(80))
        (root / f"doc{i:03}.txt").write_text(words, encoding="utf-8")


def one_round(base: Path, round_: int, files: int) -> list[str]:
    home = base / f"home{round_}"
    env = _env(home)
    subprocess.run(
        [sys.executable, "-m", "app.cli", "workspace", "new", "rw"], env=env, check=True, capture_output=True
    )
    root = base / f"docs{round_}" / "docs"
    problems: list[str] = []
    if round_ % 2:  # odd rounds: the index exists before; even rounds: the queries race its creation
        _corpus(root, files // 4, 0)
        first = subprocess.run(
            _aries("rag", "index", "add", str(root), "--name", "docs"), env=env, capture_output=True, text=True
        )
        if first.returncode != 0:
            return [f"round {round_}: first ingest failed: {first.stderr.strip()[-300:]}"]
    _corpus(root, files, round_ + 1)
    writer = subprocess.Popen(
        _aries("rag", "index", "add", str(root), "--name", "docs"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    queries = 0
    query_errors: list[str] = []
    while writer.poll() is None:
        readers = [
            subprocess.Popen(
                _aries("rag", "query", "herons", "egrets", "--index", "docs"),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for reader in readers:
            _, err = reader.communicate()
            queries += 1
            if reader.returncode != 0 and "no index named" not in err:
                query_errors.append(f"rc={reader.returncode} {err.strip()[-200:]}")
    _, err = writer.communicate()
    if writer.returncode != 0:
        problems.append(f"round {round_}: ingest rc={writer.returncode}: {err.strip()[-300:]}")
    if query_errors:
        problems.append(f"round {round_}: {len(query_errors)}/{queries} queries failed, e.g. {query_errors[0]}")
    for attempt in range(2):
        check = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True)
        if check.returncode != 0:
            problems.append(f"round {round_}: check {attempt} rc={check.returncode}: {check.stderr.strip()[-300:]}")
        else:
            print(f"round {round_}: {queries} concurrent queries; after: {check.stdout.strip()}", flush=True)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=120)
    parser.add_argument("--first", type=int, default=0, help="number of the first round (odd: index exists)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (printed)")
    args = parser.parse_args()
    problems: list[str] = []
    with contextlib.ExitStack() as stack:
        if args.keep:
            tmp = tempfile.mkdtemp(prefix="aries-rw-")
            print(f"workspaces under {tmp}", flush=True)
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="aries-rw-"))
        for round_ in range(args.first, args.first + args.rounds):
            started = time.monotonic()
            problems += one_round(Path(tmp), round_, args.files)
            print(f"round {round_}: {time.monotonic() - started:.1f} s", flush=True)
    for problem in problems:
        print("FAIL", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
