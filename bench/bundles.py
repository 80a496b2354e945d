"""Export and import of a workspace holding the full SciFact index: time and peak memory.

    .venv/bin/python bench/bundles.py [--dataset DIR] [--limit-docs N] [--embedder hash] [--pad-mib 256]

Builds a workspace with the SciFact corpus indexed (Markdown files, ``rag index add`` through the
engine; the hash embedder by default: the bundle's size and shape do not depend on the embedder),
then runs ``aries workspace export`` and ``aries workspace import`` as subprocesses and reads each
one's peak RSS (its own ``ru_maxrss``, from ``os.wait4``). It
does it twice: the workspace alone, then with ``--pad-mib`` of incompressible data added, so that
the ratio of the two peaks shows whether memory grows with the bundle's size (it should not:
members stream in 1 MiB blocks). The baseline is ``python -c pass`` with the same interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def run(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process (its own rusage, from ``wait4``)."""
    start = time.perf_counter()
    child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    elapsed = time.perf_counter() - start
    if child.returncode != 0:
        raise SystemExit(f"{argv} failed with exit code {child.returncode}")
    return elapsed, usage.ru_maxrss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--limit-docs", type=int, default=0, help="0: the whole corpus")
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--pad-mib", type=int, default=256)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="aries-bench-bundles-"))
    home = tmp / "home"
    env = {**os.environ, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": args.embedder}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    corpus = tmp / "scifact"
    corpus.mkdir()
    count = 0
    with (args.dataset / "corpus.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if args.limit_docs and count >= args.limit_docs:
                break
            row = json.loads(line)
            (corpus / f"{row['_id']}.md").write_text(f"# {row['title']}\n\n{row['text']}\n", encoding="utf-8")
            count += 1
    aries = [sys.executable, "-m", "app"]
    subprocess.run([*aries, "workspace", "new", "sci"], env=env, check=True, stdout=subprocess.DEVNULL)
    start = time.perf_counter()
    subprocess.run(
        [*aries, "-w", "sci", "rag", "index", "add", str(corpus), "--name", "scifact"],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    print(f"indexed {count} SciFact documents in {time.perf_counter() - start:.1f} s ({args.embedder} embedder)")

    _, baseline = run([sys.executable, "-c", "pass"], env)
    rows = []
    for label, pad in (("workspace", 0), (f"workspace + {args.pad_mib} MiB", args.pad_mib)):
        if pad:
            with (home / "workspaces" / "sci" / "padding.bin").open("wb") as out:
                for _ in range(pad):
                    out.write(os.urandom(1 << 20))
        bundle = tmp / f"sci-{pad}.tar.zst"
        export_s, export_kib = run([*aries, "workspace", "export", "sci", str(bundle)], env)
        import_s, import_kib = run([*aries, "workspace", "import", str(bundle), "--name", f"copy{pad}"], env)
        size = sum(p.stat().st_size for p in (home / "workspaces" / "sci").rglob("*") if p.is_file())
        rows.append((label, size, bundle.stat().st_size, export_s, export_kib, import_s, import_kib))
    print(f"baseline (python -c pass): peak RSS {baseline / 1024:.0f} MiB")
    print(f"{'':<24}{'files MiB':>10}{'bundle MiB':>11}{'export s':>10}{'peak MiB':>9}{'import s':>10}{'peak MiB':>9}")
    for label, size, bsize, es, ek, is_, ik in rows:
        sizes = f"{size / 2**20:>10.1f}{bsize / 2**20:>11.1f}"
        print(f"{label:<24}{sizes}{es:>10.2f}{ek / 1024:>9.0f}{is_:>10.2f}{ik / 1024:>9.0f}")
    (_, s0, _, _, e0, _, i0), (_, s1, _, _, e1, _, i1) = rows
    print(f"size ratio {s1 / s0:.1f}x -> peak RSS ratio export {e1 / e0:.2f}, import {i1 / i0:.2f} (bounded: ~1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
