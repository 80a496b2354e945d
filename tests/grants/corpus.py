"""A generated corpus of argv (and path) cases for the grant matcher, each with its expected decision.

``build(root, outside)`` lays out a small tree under ``root`` (files, a folder, a symlink that leaves
the root) and returns the cases: for each grant (``ls *``, ``pytest -q tests/a.py``, ``pytest *``,
``git status *``, ``make test``, a folder and a file for a file tool) the calls it must cover, and
the dangerous ones it must not — options (ASCII and Unicode dashes, ``+``, ``@``), wrappers and
interpreters (``env``, ``sh -c``, ``bash -c``, ``python -c``, ``FOO=1``, ``nice``, ``timeout``,
``xargs``, ``find -exec``, ``git -c core.pager=…``), environment variables, paths outside the roots
(absolute, ``..``, ``~``, ``$VAR``, a symlink out), shell metacharacters, look-alike program names,
another executable of the same name, another cwd.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.settings.operator import GrantPattern


@dataclass(frozen=True)
class Case:
    name: str
    pattern: GrantPattern
    facts: dict[str, Any]
    expected: bool
    args: dict[str, Any] = field(default_factory=dict)


LS = "/usr/bin/ls"
PYTEST = "/opt/venv/bin/pytest"
GIT = "/usr/bin/git"
MAKE = "/usr/bin/make"

PLAIN = ["a.txt", "docs", "docs/x.md", "tests/a.py", "src", "README.md", "x_1", "data.csv", "dir/sub", "b.2"]
OPTIONS = [
    "-la", "-R", "-a", "-p", "-x", "-", "--", "--all", "--color=always", "--rootdir=/", "-c", "--help",
    "-1", "-pplugin", "-k", "--exec=sh", "-o", "-Ccore.pager=sh",
]  # fmt: skip
UNICODE_DASHES = ["\u2212la", "\u2010x", "\u2013rootdir", "\u2014all", "\uff0dp", "\ufe63x", "\u2011R", "\u00adx"]
OTHER_SIGNS = ["+x", "+e", "@file", "@args.txt", "~", "~root", "$HOME", "%PATH%", "#x", "!x", "=x", ":x"]
METACHAR = [
    "a;b", "a|b", "a&b", "$(id)", "`id`", "a b", "a\nb", "a\tb", "*", "?", "[ab]", "a=b", "host:path",
    "http://x/y", "a'b", 'a"b', "a>b", "a<b", "{a,b}", "a\\b", "x\x00y", "a\u200bb", "ａ",
]  # fmt: skip
OUTSIDE = ["/etc/passwd", "/", "/tmp", "../x", "tests/../../x", "..", "link", "link/passwd", "/root/.ssh/id"]
WRAPPERS = [
    ["env"], ["env", "-i"], ["sh", "-c"], ["bash", "-c"], ["dash", "-c"], ["python", "-c"], ["python3", "-m"],
    ["FOO=1"], ["LD_PRELOAD=/x.so"], ["nice"], ["nice", "-n", "5"], ["timeout", "5"], ["xargs"], ["sudo"],
    ["stdbuf", "-o0"], ["nohup"], ["time"], ["command"], ["exec"], ["busybox"], ["find", ".", "-exec"],
    ["strace"], ["watch"], ["setsid"], ["flock", "x"], ["doas"], ["npx"], ["uv", "run"],
]  # fmt: skip
LOOKALIKES = {
    "ls": ["\u217cs", "l\u0455", "\uff4c\uff53", "ls\u200b", "\u200bls", "Ls", "LS", "ls.exe", "/usr/bin/ls",
           "./ls", "l s"],
    "pytest": ["p\u0443test", "pytes\u0442", "\uff50ytest", "pytest\u00a0", "py.test", "Pytest",
               "/opt/venv/bin/pytest"],
    "git": ["g\u0456t", "\u0261it", "git\u200d", "Git", "/usr/bin/git"],
    "make": ["m\u0430ke", "mak\u0435", "Make", "gmake"],
}  # fmt: skip


def layout(root: Path, outside: Path) -> None:
    for rel in ("docs/x.md", "docs/deep/y.md", "tests/a.py", "tests/b.py", "src/m.py", "README.md", "a.txt"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n", encoding="utf-8")
    (root / "docs2").mkdir(exist_ok=True)
    (root / "docs2" / "z.md").write_text("x\n", encoding="utf-8")
    (outside / "secret.txt").write_text("secret\n", encoding="utf-8")
    if not (root / "link").is_symlink():
        os.symlink(outside, root / "link")
    if not (root / "docs" / "out").is_symlink():
        os.symlink(outside, root / "docs" / "out")


def _command(argv: list[str], executable: str, cwd: str) -> dict[str, Any]:
    return {"command": {"argv": argv, "executable": executable, "cwd": cwd}}


def _argv(p: str, prog: tuple[str, ...], rest: bool, exe: str) -> GrantPattern:
    return GrantPattern(kind="argv", argv=prog, rest=rest, executable=exe, cwd=p)


def build(root: Path, outside: Path) -> list[Case]:
    layout(root, outside)
    cwd = str(root)
    cases: list[Case] = []
    cases += _wildcard_cases("ls *", _argv(cwd, ("ls",), True, LS), ["ls"], LS, cwd, outside)
    cases += _wildcard_cases("pytest *", _argv(cwd, ("pytest",), True, PYTEST), ["pytest"], PYTEST, cwd, outside)
    cases += _wildcard_cases(
        "git status *", _argv(cwd, ("git", "status"), True, GIT), ["git", "status"], GIT, cwd, outside
    )
    cases += _exact_cases(
        "pytest -q tests/a.py", _argv(cwd, ("pytest", "-q", "tests/a.py"), False, PYTEST), PYTEST, cwd
    )
    cases += _exact_cases("make test", _argv(cwd, ("make", "test"), False, MAKE), MAKE, cwd)
    cases += _git_cases(_argv(cwd, ("git", "status"), True, GIT), cwd)
    cases += _path_cases(root, outside)
    return cases


def _wildcard_cases(
    label: str, pattern: GrantPattern, head: list[str], exe: str, cwd: str, outside: Path
) -> list[Case]:
    cases: list[Case] = []

    def case(
        name: str, argv: list[str], expected: bool, *, executable: str = exe, where: str = cwd, **args: Any
    ) -> None:
        cases.append(Case(f"{label}: {name}", pattern, _command(argv, executable, where), expected, args))

    for n in (1, 2, 3):
        for combo in itertools.combinations(PLAIN, n):
            case(f"plain {combo}", [*head, *combo], True)
    case("no further argument", head, False)
    for option in [*OPTIONS, *UNICODE_DASHES, *OTHER_SIGNS]:
        for position in range(3):
            argv = [*head, "a.txt", "docs"]
            argv.insert(len(head) + position, option)
            case(f"option {option!r} at {position}", argv, False)
    for bad in METACHAR:
        case(f"metacharacter {bad!r}", [*head, "a.txt", bad], False)
        case(f"metacharacter {bad!r} alone", [*head, bad], False)
    for path in [*OUTSIDE, str(outside), str(outside / "secret.txt")]:
        case(f"outside {path!r}", [*head, path], False)
        case(f"outside {path!r} after a plain one", [*head, "docs", path], False)
    for wrapper in WRAPPERS:
        case(f"wrapped by {wrapper}", [*wrapper, *head, "a.txt"], False)
        case(f"wrapped by {wrapper} as one string", [*wrapper, " ".join([*head, "a.txt"])], False)
    for lookalike in LOOKALIKES[head[0]]:
        case(f"look-alike {lookalike!r}", [lookalike, *head[1:], "a.txt"], False)
    case("another executable of that name", [*head, "a.txt"], False, executable=f"/tmp/evil/{head[0]}")
    case("no executable", [*head, "a.txt"], False, executable="")
    case("another cwd", [*head, "a.txt"], False, where=str(outside))
    for env in ({"FOO": "1"}, {"LD_PRELOAD": "/x.so"}, {"PYTHONPATH": "."}, {"PAGER": "sh"}):
        case(f"environment {env}", [*head, "a.txt"], False, env=env)
    return cases


def _exact_cases(label: str, pattern: GrantPattern, exe: str, cwd: str) -> list[Case]:
    argv = list(pattern.argv)
    cases = [Case(f"{label}: exact", pattern, _command(argv, exe, cwd), True)]

    def deny(name: str, call: list[str], *, executable: str = exe, where: str = cwd, **args: Any) -> None:
        cases.append(Case(f"{label}: {name}", pattern, _command(call, executable, where), False, args))

    for extra in [*PLAIN, *OPTIONS[:8], *UNICODE_DASHES[:3], "-p", "plugin", "--rootdir=/"]:
        deny(f"extra {extra!r} at the end", [*argv, extra])
        deny(f"extra {extra!r} after the program", [argv[0], extra, *argv[1:]])
    for i in range(1, len(argv)):
        deny(f"without argument {i}", argv[:i] + argv[i + 1 :])
        for variant in (argv[i].upper(), argv[i] + " ", argv[i] + "\u200b", "./" + argv[i], argv[i][:-1]):
            deny(f"argument {i} as {variant!r}", [*argv[:i], variant, *argv[i + 1 :]])
    if len(argv) > 2:
        deny("arguments reordered", [argv[0], *reversed(argv[1:])])
    for wrapper in WRAPPERS:
        deny(f"wrapped by {wrapper}", [*wrapper, *argv])
    for lookalike in LOOKALIKES[argv[0]]:
        deny(f"look-alike {lookalike!r}", [lookalike, *argv[1:]])
    deny("another executable of that name", argv, executable=f"/home/u/.local/bin/{argv[0]}")
    deny("another cwd", argv, where="/")
    deny("an environment variable", argv, env={"PYTEST_ADDOPTS": "-p evil"})
    return cases


def _git_cases(pattern: GrantPattern, cwd: str) -> list[Case]:
    calls = [
        ["git", "-c", "core.pager=sh", "status", "docs"],
        ["git", "-ccore.pager=sh", "status"],
        ["git", "--exec-path=/tmp", "status", "docs"],
        ["git", "-C", "/", "status", "docs"],
        ["git", "status", "--porcelain"],
        ["git", "status", "-c", "x"],
        ["git", "log", "docs"],
        ["git", "submodule", "foreach", "id"],
        ["git", "status"],
        ["git", "difftool", "docs"],
        ["git", "status", "docs;id"],
    ]
    return [Case(f"git status *: {' '.join(c)!r}", pattern, _command(c, GIT, cwd), False) for c in calls]


def _paths(root: Path, *rels: str, raws: tuple[str, ...] = ()) -> dict[str, Any]:
    facts = []
    for i, rel in enumerate(rels):
        real = os.path.realpath(root / rel)
        facts.append({"arg": "path", "raw": raws[i] if i < len(raws) else rel, "path": real, "root": str(root)})
    return {"paths": facts}


def _path_cases(root: Path, outside: Path) -> list[Case]:
    folder = GrantPattern(kind="path", path=str(root / "docs"), folder=True)
    file = GrantPattern(kind="path", path=str(root / "docs" / "x.md"))
    cases = [
        Case("folder docs/: a file in it", folder, _paths(root, "docs/x.md"), True),
        Case("folder docs/: a file deeper", folder, _paths(root, "docs/deep/y.md"), True),
        Case("folder docs/: a new file", folder, _paths(root, "docs/new.md"), True),
        Case("folder docs/: the folder itself", folder, _paths(root, "docs"), True),
        Case("folder docs/: a sibling with the same prefix", folder, _paths(root, "docs2/z.md"), False),
        Case("folder docs/: another folder", folder, _paths(root, "tests/a.py"), False),
        Case("folder docs/: the root", folder, _paths(root, "."), False),
        Case("folder docs/: a symlink out of it", folder, _paths(root, "docs/out/secret.txt"), False),
        Case(
            "folder docs/: '..' that resolves back in",
            folder,
            _paths(root, "docs/x.md", raws=("docs/deep/../x.md",)),
            False,
        ),
        Case("folder docs/: one of two paths outside", folder, _paths(root, "docs/x.md", "src/m.py"), False),
        Case("folder docs/: a shell command", folder, _command(["ls", "docs"], LS, str(root)), False),
        Case("folder docs/: no paths", folder, {"paths": []}, False),
        Case("file docs/x.md: itself", file, _paths(root, "docs/x.md"), True),
        Case("file docs/x.md: another file", file, _paths(root, "docs/deep/y.md"), False),
        Case("file docs/x.md: its folder", file, _paths(root, "docs"), False),
        Case("file docs/x.md: a longer name", file, _paths(root, "docs/x.md.bak"), False),
    ]
    gone = GrantPattern(kind="path", path=str(outside), folder=True)
    cases.append(Case("a folder no longer under the roots", gone, _paths(root, "link/secret.txt"), False))
    return cases
