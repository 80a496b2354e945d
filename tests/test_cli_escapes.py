"""Every ``aries`` command prints through the one terminal writer (``app.cli._common``).

Text that came from files, tools, models or the network reaches the terminal only neutralised: no
raw C0/C1 control (an ESC, the 8-bit CSI U+009B), no bidi control (U+202E), so no escape sequence
(``ESC ] 52 ;`` writes the clipboard, ``ESC [ 2 J`` clears the screen) can act on the operator's
terminal, in text or in JSON (which stays valid JSON with the same data).

The commands are enumerated from the parser that ``app.cli.registry`` builds: a command added
without an entry in :data:`CASES` fails :func:`test_every_command_is_run_over_hostile_text`. Each
case is a real ``python -m app`` subprocess over one workspace whose documents, file names,
artifact descriptions, plan names, profiles, tool output, context tree and the model server's
answers hold the hostile text; the raw bytes of its stdout and stderr are checked. Most cases must
also *show* the hostile text, escaped (else the case would not exercise the writer).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.loopback import LoopbackServer

REPO = Path(__file__).resolve().parents[1]

H = "\u202e\u009b\x1b]52;c;aGVsbG8=\x07\x1b[2J"
"""U+202E (right-to-left override), U+009B (8-bit CSI), OSC 52 (write the clipboard), ED (clear the screen)."""
TEXT = f"# Llamas\n\nLlamas graze on the altiplano {H} and hum at dusk.\n"
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
ESCAPED = ("\\x1b", "\\u001b", "<U+202E>", "\\u202e", "\\x9b", "\\u009b")
"""How the hostile text looks once neutralised: in text, and in JSON."""


def raw_problems(raw: bytes) -> list[str]:
    """What in ``raw`` could act on a terminal: an ESC byte, any C0/C1 control but newline and tab,
    a bidi control, or bytes that are not UTF-8."""
    problems = []
    if b"\x1b" in raw:
        problems.append("ESC byte")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [*problems, f"not UTF-8: {exc}"]
    for char in sorted(set(text)):
        code = ord(char)
        if (code < 0x20 and char not in "\n\t") or 0x7F <= code <= 0x9F or char in BIDI:
            problems.append(f"U+{code:04X}")
    return problems


@dataclass
class Hostile:
    """The template: an ARIES_HOME with workspace ``hw``, and the ids the cases need."""

    base: Path
    home: Path
    ids: dict[str, str] = field(default_factory=dict)


def _env(home: Path, **extra: str) -> dict[str, str]:
    drop = ("ARIES_MODEL", "OLLAMA_HOST", "OPENAI_BASE_URL", "OPENAI_API_KEY")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("ARIES_BUNDLE")}
    return {**env, "ARIES_HOME": str(home), "AXIOMME_EMBEDDER": "hash", "PYTHONPATH": str(REPO), **extra}


def aries(
    argv: list[str], home: Path, *, stdin: bytes = b"", timeout: float = 120, **extra: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "app", *argv],
        input=stdin,
        capture_output=True,
        env=_env(home, **extra),
        timeout=timeout,
        cwd=home.parent,
    )


def _ok(argv: list[str], home: Path, **extra: str) -> Any:
    done = aries(argv, home, **extra)
    assert done.returncode == 0, (argv, done.stderr.decode(errors="replace"))
    text = done.stdout.decode()
    return json.loads(text) if "--json" in argv else text


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Hostile:
    base = tmp_path_factory.mktemp("hostile")
    home = base / "home"
    found = Hostile(base, home)
    _ok(["workspace", "new", "hw"], home)
    ws = home / "workspaces" / "hw"
    docs = base / "docs"
    docs.mkdir()
    (docs / f"llamas{H}.md").write_text(TEXT, encoding="utf-8")
    (docs / "plain.md").write_text(TEXT, encoding="utf-8")
    (ws / "notes").mkdir()
    (ws / "notes" / "h.txt").write_text(TEXT, encoding="utf-8")
    (ws / "notes" / f"n{H}.txt").write_text(TEXT, encoding="utf-8")  # a name that tools list
    (ws / "profiles").mkdir()
    (ws / "profiles" / "hostile.yaml").write_text(
        f"name: hostile\ndescription: {json.dumps(H)}\nsystem_prompt: {json.dumps(TEXT)}\n", encoding="utf-8"
    )
    (base / f"policy{H}.yaml").write_text((REPO / "profiles" / "policy-default.yaml").read_text(), encoding="utf-8")
    _ok(["-w", "hw", "rag", "index", "add", str(docs), "--name", "docs"], home)
    found.ids["handle"] = _ok(["-w", "hw", "rag", "query", "llamas", "--json"], home)["hits"][0]["handle"]
    _ok(["-w", "hw", "artifact", "add", str(ws / "notes" / "h.txt"), "--description", H], home)
    _ok(["-w", "hw", "context", "add", str(docs)], home)
    found.ids["trace"] = _ok(["-w", "hw", "context", "find", f"llamas {H}", "--json"], home)["trace"]["id"]
    plan = base / f"plan{H}.yaml"
    plan.write_text("version: '1.0'\nsteps:\n  - tool: fs.read\n    args: {path: notes/h.txt}\n", encoding="utf-8")
    found.ids["plan"] = str(plan)
    found.ids["run"] = _ok(["-w", "hw", "run", str(plan), "--json"], home)["run_id"]
    write = ["tool", "call", "builtin:fs:write_text", "--approve", "--args"]
    _ok(["-w", "hw", *write, json.dumps({"path": "notes/w.txt", "text": TEXT})], home)
    found.ids["session"] = _ok(["-w", "hw", "context", "session", "new"], home).strip()
    messages = base / "messages.jsonl"
    messages.write_text(
        json.dumps({"role": "user", "content": f"I prefer llamas {H} over alpacas."}) + "\n", encoding="utf-8"
    )
    found.ids["messages"] = str(messages)
    _ok(["-w", "hw", "context", "session", "append", found.ids["session"], str(messages)], home)
    found.ids["package"] = str(base / f"pkg{H}.axpkg")
    _ok(["-w", "hw", "context", "export", "axiom://resources/docs", found.ids["package"]], home)
    found.ids["bundle"] = str(base / f"b{H}.aries.tar.zst")
    _ok(["-w", "hw", "ask", f"where do llamas {H} graze"], home)  # a conversation: aries history lists it
    _ok(["workspace", "export", "hw", found.ids["bundle"]], home)
    dataset = base / "dataset"
    dataset.mkdir()
    (dataset / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": H, "text": TEXT}) + "\n")
    (dataset / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": f"llamas {H}"}) + "\n")
    (dataset / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    found.ids["dataset"] = str(dataset)
    return found


@pytest.fixture
def hostile(template: Hostile, tmp_path: Path) -> Hostile:
    """A fresh copy of the template's home for one case (cases may change the workspace)."""
    home = tmp_path / "home"
    shutil.copytree(template.home, home)
    return Hostile(template.base, home, dict(template.ids))


@pytest.fixture
def model_server() -> Iterator[LoopbackServer]:
    """An Ollama-protocol server whose model names hold the hostile text (what the network says)."""
    from aiohttp import web

    async def tags(request: Any) -> Any:
        return web.json_response({"models": [{"name": f"llama{H}:1b", "model": f"llama{H}:1b", "size": 1}]})

    server = LoopbackServer({"GET /api/tags": tags})
    yield server
    server.stop()


@dataclass(frozen=True)
class Case:
    """One run: its argv (``{name}`` filled from the template's ids and paths), whether the output
    must show the hostile text (escaped), and environment additions."""

    argv: tuple[str, ...]
    shows: bool = True
    stdin: str = ""
    env: tuple[tuple[str, str], ...] = ()
    model_server: bool = False


def c(*argv: str, shows: bool = True, stdin: str = "", model_server: bool = False, **env: str) -> Case:
    return Case(argv, shows, stdin, tuple(env.items()), model_server)


W = ("-w", "hw")
CASES: dict[tuple[str, ...], list[Case]] = {
    ("workspace", "new"): [c("workspace", "new", "hw", shows=False), c("workspace", "new", "x", "--json", shows=False)],
    ("workspace", "open"): [c("workspace", "open", "hw", "--check", shows=False), c("workspace", "open", H)],
    ("workspace", "list"): [c("workspace", "list", shows=False), c("workspace", "list", "--json", shows=False)],
    ("workspace", "close"): [c("workspace", "close", "hw", shows=False), c("workspace", "close", H)],
    ("workspace", "export"): [
        c("workspace", "export", "hw", "{base}/out{H}.tar.zst"),
        c("workspace", "export", "hw", "{base}/j{H}.tar.zst", "--json"),
    ],
    ("workspace", "import"): [
        c("workspace", "import", "{bundle}", "--name", "copy"),
        c("workspace", "import", "{bundle}", "--name", "copy2", "--json", shows=False),
    ],
    ("workspace", "trust"): [
        c("workspace", "trust", "hw", shows=False),  # its own workspace: nothing to review
        c("workspace", "trust", "hw", "--json", shows=False),
        c("workspace", "trust", H),
    ],
    ("artifact", "add"): [
        c(*W, "artifact", "add", "{ws}/notes/w.txt", "-d", H, "--json"),
        c(*W, "artifact", "add", "{base}/docs/llamas{H}.md", shows=False),  # refused: outside the roots
    ],
    ("history", "fork"): [  # and ``aries history`` itself (a parser with sub-commands is not a leaf)
        c(*W, "history"),
        c(*W, "history", "--json"),
        c(*W, "history", "fork", "last", "--turn", "1", shows=False),
        c(*W, "history", "fork", H),
    ],
    ("rewind",): [c(*W, "rewind", H), c(*W, "rewind", H, "--json"), c(*W, "rewind", "1", "--yes", shows=False)],
    ("history", "export"): [
        c(*W, "history", "export", "last"),
        c(*W, "history", "export", "last", "--format", "html"),
        c(*W, "history", "export", H),
    ],
    ("history", "search"): [
        c(*W, "history", "search", "llamas"),
        c(*W, "history", "search", "graze", "--json", "--role", "user"),
        c(*W, "history", "search", f"llamas {H}", "--since", "2020-01-01"),
        c(*W, "history", "search", "llamas", "--since", H),
    ],
    ("artifact", "list"): [c(*W, "artifact", "list"), c(*W, "artifact", "list", "--json")],
    ("rag", "index", "add"): [
        c(*W, "rag", "index", "add", "{base}/docs", "--name", "again"),
        c(*W, "rag", "index", "add", "{base}/docs", "--name", "j", "--json"),
    ],
    ("rag", "index", "list"): [
        c(*W, "rag", "index", "list", shows=False),
        c(*W, "rag", "index", "list", "--json", shows=False),
    ],
    ("rag", "index", "check"): [
        c(*W, "rag", "index", "check", "docs", shows=False),
        c(*W, "rag", "index", "check", H, "--json"),
    ],
    ("rag", "index", "use"): [c(*W, "rag", "index", "use", "docs", shows=False), c(*W, "rag", "index", "use", H)],
    ("rag", "index", "drop"): [c(*W, "rag", "index", "drop", H), c(*W, "rag", "index", "drop", "docs", shows=False)],
    ("rag", "index", "repair"): [
        c(*W, "rag", "index", "repair", H),
        c(*W, "rag", "index", "repair", "docs", "--json", shows=False),
    ],
    ("rag", "index", "rebuild"): [
        c(*W, "rag", "index", "rebuild", "docs", "--from", "{base}/docs"),
        c(*W, "rag", "index", "rebuild", H),
    ],
    ("rag", "index", "watch"): [  # refused: a name that is not one, a folder outside the policy's roots
        c(*W, "rag", "index", "watch", H),
        c(*W, "rag", "index", "watch", "docs", shows=False),
    ],
    ("rag", "query"): [c(*W, "rag", "query", "llamas", H), c(*W, "rag", "query", "llamas", "--json")],
    ("rag", "show"): [c(*W, "rag", "show", "{handle}"), c(*W, "rag", "show", "{handle}", "--json")],
    ("rag", "last"): [c(*W, "rag", "last"), c(*W, "rag", "last", "--json")],
    ("eval", "rag"): [
        c("eval", "rag", "--dataset", "{dataset}", shows=False),
        c("eval", "rag", "--dataset", "{dataset}", "--json", shows=False),
        c("eval", "rag", "--dataset", "{base}/none{H}"),
    ],
    ("grants", "add"): [
        c(*W, "grants", "add", "builtin:shell:run", "ls {H}"),
        c(*W, "grants", "--json", "add", "builtin:fs:write_text", "notes/h{H}.txt"),
        c(*W, "grants", "add", "builtin:shell:run", "{H} *"),
    ],
    ("grants", "revoke"): [c(*W, "grants", "revoke", H)],
    ("tool", "list"): [c(*W, "tool", "list", "--policy", "{base}/policy{H}.yaml")],
    ("tool", "call"): [
        c(*W, "tool", "call", "builtin:fs:read_text", "--args", '{{"path": "notes/h.txt"}}'),
        c(*W, "tool", "call", "builtin:fs:list_dir", "--args", '{{"path": "notes"}}'),
    ],
    ("tool", "undo"): [c(*W, "tool", "undo", "--approve", shows=False), c(*W, "tool", "undo", H)],
    ("tool", "doctor"): [c(*W, "tool", "doctor", "--policy", "{base}/policy{H}.yaml")],
    ("desktop",): [
        c(*W, "desktop", "--json", "read notes/h.txt", shows=False),
        c(*W, "desktop", "--yes", "--json", "read notes/h.txt"),
        c(*W, "desktop", "--yes", "read notes/h.txt"),
    ],
    ("model", "list"): [
        c("model", "list", model_server=True),
        c("model", "list", "--json", model_server=True),
        c("model", "list", model_server=True, ARIES_MODEL=f"ollama:llama{H}"),
        c("model", "list", "--json", model_server=True, ARIES_MODEL=f"ollama:llama{H}"),
    ],
    ("ask",): [
        c(*W, "ask", "where do llamas graze"),
        c(*W, "ask", "--json", "where do llamas graze"),
        c(*W, "ask", "--json", "--stdin", stdin=json.dumps({"id": H, "query": "llamas"})),
    ],
    ("ingest",): [
        c(*W, "ingest", "{base}/docs", "--index", "in"),
        c(*W, "ingest", "{base}/docs", "--index", "jn", "--json"),
    ],
    ("status",): [
        c(*W, "status", shows=False),
        c(*W, "status", "--json", shows=False),
        c(*W, "status", ARIES_MODEL=f"ollama:{H}"),
    ],
    ("run",): [c(*W, "run", "{plan}"), c(*W, "run", "{plan}", "--json", shows=False)],
    ("runs",): [c(*W, "runs"), c(*W, "runs", "--json")],
    ("report",): [c(*W, "report", "{run}"), c(*W, "report", "{run}", "--json")],
    ("replay",): [
        c(*W, "replay", "{run}", shows=False),
        c(*W, "replay", "{run}", "--dry", "--json", shows=False),
        c(*W, "replay", H),
    ],
    ("profile", "list"): [c(*W, "profile", "list"), c(*W, "profile", "list", "--json")],
    ("profile", "show"): [c(*W, "profile", "show", "hostile"), c(*W, "profile", "show", H)],
    ("profile", "use"): [c(*W, "profile", "use", "hostile", shows=False), c(*W, "profile", "use", H)],
    ("cloud", "status"): [c(*W, "cloud", "status", shows=False), c(*W, "cloud", "status", "--json", shows=False)],
    ("cloud", "forget"): [c(*W, "cloud", "forget", H), c(*W, "cloud", "forget", "--json", shows=False)],
    ("context", "add"): [
        c(*W, "context", "add", "{base}/docs", "--to", "axiom://resources/again"),
        c(*W, "context", "add", "{base}/docs", "--to", "axiom://resources/j", "--json"),
    ],
    ("context", "log"): [
        c(*W, "context", "log", shows=False),
        c(*W, "context", "log", "--json", shows=False),
    ],
    ("context", "ls"): [
        c(*W, "context", "ls", "axiom://resources/docs", shows=False),
        c(*W, "context", "ls", "axiom://resources/docs", "--json", shows=False),
    ],
    ("context", "read"): [c(*W, "context", "read", "axiom://resources/docs/plain.md")],
    ("context", "export"): [c(*W, "context", "export", "axiom://resources/docs", "{base}/e{H}.axpkg", "--json")],
    ("context", "import"): [
        c(*W, "context", "import", "{package}", "--to", "axiom://resources/imported", shows=False),
        c(*W, "context", "import", "{package}", "--to", "axiom://resources/j", "--json"),
    ],
    ("context", "reconcile"): [
        c(*W, "context", "reconcile", shows=False),
        c(*W, "context", "reconcile", "--json", shows=False),
    ],
    ("context", "evidence"): [c(*W, "context", "evidence", "--out", "{base}/evidence{H}")],
    ("context", "session", "new"): [
        c(*W, "context", "session", "new", shows=False),
        c(*W, "context", "session", "new", H),
    ],
    ("context", "session", "append"): [
        c(*W, "context", "session", "append", "{session}", "{messages}", shows=False),
        c(*W, "context", "session", "append", H, "{messages}"),
    ],
    ("context", "session", "commit"): [c(*W, "context", "session", "commit", "{session}", "--json", shows=False)],
    ("context", "find"): [c(*W, "context", "find", "llamas"), c(*W, "context", "find", "llamas", "--json")],
    ("context", "search"): [c(*W, "context", "search", "llamas"), c(*W, "context", "search", "llamas", "--json")],
    ("context", "trace"): [
        c(*W, "context", "trace"),
        c(*W, "context", "trace", "{trace}"),
        c(*W, "context", "trace", "{trace}", "--json"),
    ],
    ("serve",): [c(*W, "serve", "--host", H)],
}


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield prefix
        return
    for name, child in subs[0].choices.items():
        yield from _leaves(child, (*prefix, name))


def test_every_command_is_run_over_hostile_text() -> None:
    from app.cli import build_parser

    assert sorted(_leaves(build_parser())) == sorted(CASES)


def _fill(text: str, hostile: Hostile) -> str:
    names = {**hostile.ids, "base": str(hostile.base), "ws": str(hostile.home / "workspaces" / "hw"), "H": H}
    return text.format(**names)


RUNS = [(path, n) for path, cases in CASES.items() for n in range(len(cases))]


@pytest.mark.parametrize(("path", "number"), RUNS, ids=[f"{' '.join(p)}#{n}" for p, n in RUNS])
def test_no_command_lets_hostile_text_act_on_the_terminal(
    path: tuple[str, ...], number: int, hostile: Hostile, request: pytest.FixtureRequest
) -> None:
    case = CASES[path][number]
    extra = dict(case.env)
    if case.model_server:
        server = request.getfixturevalue("model_server")
        extra["OLLAMA_HOST"] = server.url
    argv = [_fill(arg, hostile) for arg in case.argv]
    done = aries(argv, hostile.home, stdin=case.stdin.encode(), **extra)
    where = f"aries {' '.join(argv)!r} (exit {done.returncode})"
    assert done.returncode not in (-6, -11), where  # no crash
    assert b"Traceback" not in done.stderr, (where, done.stderr.decode(errors="replace"))
    assert raw_problems(done.stdout) == [], (where, "stdout", done.stdout[:2000])
    assert raw_problems(done.stderr) == [], (where, "stderr", done.stderr[:2000])
    if "--json" in argv and done.returncode == 0 and done.stdout.strip():
        json.loads(done.stdout)  # JSON stays JSON
    if case.shows:
        both = (done.stdout + done.stderr).decode()
        assert any(mark in both for mark in ESCAPED), (where, "the hostile text is not shown", both[:2000])


def test_the_writer_is_the_only_way_to_the_terminal() -> None:
    """No command module writes to the terminal but through ``app.cli._common`` (its ``out``,
    ``warn``, ``err``, ``progress``, ``print_json``, ``print_table`` and ``console``)."""
    import re

    direct = re.compile(r"(?<![.\w])print\(|sys\.std(out|err)\.write|\.buffer\.write|os\.write\(|rich\.console")
    offenders = []
    for module in sorted((REPO / "app" / "cli").glob("*.py")):
        if module.name == "_common.py":
            continue
        for number, line in enumerate(module.read_text(encoding="utf-8").splitlines(), start=1):
            if direct.search(line):
                offenders.append(f"{module.name}:{number}: {line.strip()}")
    assert offenders == []
