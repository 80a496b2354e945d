"""Ingest throughput: the whole ``index add`` pipeline vs the raw encoder on the same chunks.

    .venv/bin/python bench/retrieval_ingest.py [--limit-docs 500] [--dataset DIR] [--embedder NAME]

Writes the first N SciFact abstracts as Markdown files (``# title`` + abstract) into a
temporary folder, indexes the folder with ``RetrievalEngine.index_add`` (scan, read, hash,
load, chunk, embed, Tantivy + Chroma + manifest writes), then encodes exactly the chunks that
were written with the bare model call (``SentenceTransformer.encode``, same batch size) in
the same process, once before and once after the pipeline run (the machine may be shared, so
the raw rate is the mean of the two).  The model is loaded before any clock starts.  Prints
chunks/s of both, their ratio (target ≥ 0.85) by wall-clock and by process CPU time, and
the peak RSS of the process.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--limit-docs", type=int, default=300)
    parser.add_argument("--embedder", default="sentence-transformers")
    args = parser.parse_args()

    os.environ["AXIOMME_EMBEDDER"] = args.embedder
    from services.retrieval import RetrievalEngine, RetrievalSettings
    from services.retrieval.embedders import SentenceTransformerEmbedder
    from services.workspace.manager import Workspace

    with tempfile.TemporaryDirectory(prefix="aries-bench-ingest-") as tmp:
        root = Path(tmp) / "corpus"
        root.mkdir()
        count = 0
        with (args.dataset / "corpus.jsonl").open(encoding="utf-8") as handle:
            for line in handle:
                if count >= args.limit_docs:
                    break
                row = json.loads(line)
                (root / f"{row['_id']}.md").write_text(f"# {row['title']}\n\n{row['text']}\n", encoding="utf-8")
                count += 1
        workspace = Workspace(Path(tmp) / "ws", "bench")
        workspace.ensure_layout()
        settings = RetrievalSettings.from_env()
        with RetrievalEngine(workspace, settings) as engine:
            engine.preload()
            embedder = engine.embedder

            def raw(texts: list[str]) -> tuple[float, float]:
                wall, cpu = time.perf_counter(), time.process_time()
                if isinstance(embedder, SentenceTransformerEmbedder):
                    embedder.encode(texts)
                else:
                    embedder.embed(texts)
                return time.perf_counter() - wall, time.process_time() - cpu

            # the chunks are only known after indexing: chunk once up front with the same code
            from services.retrieval.chunking import chunk_document
            from services.retrieval.loaders import load_bytes

            texts = []
            for path in sorted(root.iterdir()):
                document = load_bytes("text/markdown", path.read_bytes())
                texts += [c.embed_text for c in chunk_document(document, path.name, embedding_model=embedder.model_id)]
            raw_before = raw(texts)
            wall, cpu = time.perf_counter(), time.process_time()
            report = engine.index_add(root, name="bench")
            pipeline = (time.perf_counter() - wall, time.process_time() - cpu)
            raw_after = raw(texts)
            store = engine.indexes.store("bench")
            written = sorted(
                stored.chunk.embed_text for stored in store.manifest.get_chunks(store.manifest.chunk_ids()).values()
            )
        assert written == sorted(texts), "the pipeline wrote other chunks than the ones encoded raw"
        raw_wall = (raw_before[0] + raw_after[0]) / 2
        raw_cpu = (raw_before[1] + raw_after[1]) / 2
        n = len(texts)
        result = {
            "embedder": embedder.model_id,
            "documents": count,
            "chunks": n,
            "files_added": len(report.added),
            "pipeline_s": round(pipeline[0], 2),
            "pipeline_chunks_per_s": round(n / pipeline[0], 2),
            "raw_encoder_s": [round(raw_before[0], 2), round(raw_after[0], 2)],
            "raw_encoder_chunks_per_s": round(n / raw_wall, 2),
            "ratio_wall": round(raw_wall / pipeline[0], 3),
            "pipeline_cpu_s": round(pipeline[1], 2),
            "raw_encoder_cpu_s": round(raw_cpu, 2),
            "ratio_cpu": round(raw_cpu / pipeline[1], 3),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "cpus": os.cpu_count(),
        }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
