"""Build the labelled citation set: (sentence, chunk, label) pairs from SciFact, mechanically.

    .venv/bin/python bench/citation_set.py [--dataset DIR] [--out FILE] [--check]

Every SciFact claim of the shared split (written by annotators: paraphrases of, or negations of,
what an abstract reports) is paired

* with each abstract judged relevant to it → ``"supported"``;
* with the best-ranked abstract that is *not* judged relevant, by BM25 (Tantivy, its default
  tokenizer, over title + text: the README's first baseline) → ``"unsupported"``.

The chunk is the abstract's text (without its title: a chunk from the middle of a document has
none). The labels are mechanical, so they carry SciFact's own noise: a claim judged against an
abstract that *contradicts* it is still "supported" here (grounded in the chunk, not proven true),
and an unjudged top-ranked abstract may in fact discuss the claim. Nothing here was chosen by
looking at a checker's output: this file and its output were committed before the checker existed.

Same collection → byte-identical output (sorted by query id, then label, then document id).
``--check`` rebuilds in memory and fails if the committed file differs.

The file holds ids and labels only: the texts are SciFact's (Wadden et al., EMNLP 2020;
github.com/allenai/scifact: claims and judgments CC BY 4.0, abstracts from S2ORC ODC-By 1.0 —
attribution required, for research and evaluation only, not to be shipped inside a product), so they
stay in the shared collection and ``with_texts`` joins them at run time (the claim as ``sentence``, the
abstract's text as ``chunk``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# beside the checkout (the project's habit), or beside the folder of worktrees
DEFAULT_DATASET = next(
    (base / "shared" / "eval" / "scifact" for base in (REPO.parent, REPO.parent.parent) if (base / "shared").is_dir()),
    REPO.parent / "shared" / "eval" / "scifact",
)
DEFAULT_OUT = REPO / "tests" / "fixtures" / "citation_pairs.jsonl"
NEGATIVES_PER_CLAIM = 1
DEPTH = 20


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _qrels(path: Path) -> dict[str, set[str]]:
    judged: dict[str, set[str]] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if number == 0 or not line.strip():
            continue
        query_id, doc_id, score = line.split("\t")
        if int(score) > 0:
            judged.setdefault(query_id, set()).add(doc_id)
    return judged


def _bm25_ranker(corpus: list[dict[str, Any]], folder: str) -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("doc_id", stored=True, tokenizer_name="raw")
    builder.add_text_field("body", stored=False)
    schema = builder.build()
    index = tantivy.Index(schema, path=folder)
    writer = index.writer(heap_size=50_000_000, num_threads=1)
    for doc in corpus:
        writer.add_document(tantivy.Document(doc_id=doc["_id"], body=f"{doc['title']}\n{doc['text']}"))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()

    def rank(text: str) -> list[str]:
        # the claim's words as free text; punctuation Tantivy's query parser would read as syntax is dropped
        cleaned = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in text)
        query = index.parse_query(cleaned, ["body"])
        hits = searcher.search(query, DEPTH).hits
        # ties broken by doc id so the order does not depend on segment layout
        ordered = sorted(hits, key=lambda hit: (-round(hit[0], 5), searcher.doc(hit[1])["doc_id"][0]))
        return [searcher.doc(address)["doc_id"][0] for _, address in ordered]

    return rank


def build(dataset: Path) -> list[dict[str, Any]]:
    corpus = _read_jsonl(dataset / "corpus.jsonl")
    queries = sorted(_read_jsonl(dataset / "queries.jsonl"), key=lambda q: int(q["_id"]))
    judged = _qrels(dataset / "qrels.tsv")
    pairs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="citation-set-") as folder:
        rank = _bm25_ranker(corpus, folder)
        for query in queries:
            relevant = judged.get(query["_id"], set())
            if not relevant:
                continue
            claim = " ".join(str(query["text"]).split())
            for doc_id in sorted(relevant, key=int):
                pairs.append(_pair(query["_id"], doc_id, "supported", None))
            negatives = [(place, doc) for place, doc in enumerate(rank(claim), 1) if doc not in relevant]
            for place, doc_id in negatives[:NEGATIVES_PER_CLAIM]:
                pairs.append(_pair(query["_id"], doc_id, "unsupported", place))
    return pairs


def _pair(query_id: str, doc_id: str, label: str, rank: int | None) -> dict[str, Any]:
    return {"query_id": query_id, "doc_id": doc_id, "label": label, "bm25_rank": rank}


def load(path: Path = DEFAULT_OUT, dataset: Path = DEFAULT_DATASET) -> list[dict[str, Any]]:
    """The committed pairs with their texts joined from the collection (FileNotFoundError without it)."""
    with path.open(encoding="utf-8") as handle:
        pairs = [json.loads(line) for line in handle if line.strip()]
    return with_texts(pairs, dataset)


def with_texts(pairs: list[dict[str, Any]], dataset: Path) -> list[dict[str, Any]]:
    """Each pair with ``sentence`` (the claim) and ``chunk`` (the abstract's text, without its title)."""
    texts = {doc["_id"]: " ".join(str(doc["text"]).split()) for doc in _read_jsonl(dataset / "corpus.jsonl")}
    claims = {q["_id"]: " ".join(str(q["text"]).split()) for q in _read_jsonl(dataset / "queries.jsonl")}
    return [{**pair, "sentence": claims[pair["query_id"]], "chunk": texts[pair["doc_id"]]} for pair in pairs]


def dump(pairs: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(pair, ensure_ascii=False, sort_keys=True) + "\n" for pair in pairs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="fail if the committed file differs from a rebuild")
    args = parser.parse_args(argv)
    if not (args.dataset / "corpus.jsonl").is_file():
        print(f"citation_set: no SciFact collection at {args.dataset} (corpus.jsonl missing)", file=sys.stderr)
        return 2
    text = dump(build(args.dataset))
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        print(f"citation_set: {args.out} {'matches' if same else 'DIFFERS from'} a rebuild")
        return 0 if same else 1
    tmp = args.out.with_suffix(args.out.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(args.out)
    counts: dict[str, int] = {}
    for line in text.splitlines():
        label = json.loads(line)["label"]
        counts[label] = counts.get(label, 0) + 1
    print(f"citation_set: {sum(counts.values())} pairs {counts} → {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
