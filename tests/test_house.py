"""The shape the house issues promised, kept: no product function over 80 lines, no import of another
module's ``_private`` name, no controller calls back into the App from a thread, and the import
contracts count type-only imports (no circle hides behind ``TYPE_CHECKING``)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("app", "screens", "widgets", "services", "profiles")
LONGEST = 80  # lines, decorators excluded: a function that needs more has more than one step in it

# Offenders let through while they are being fixed (none now). An offender not listed fails the test,
# and so does an entry that is no longer an offender: the list can only shrink.
PENDING: frozenset[str] = frozenset()


def shape_offenders(root: Path) -> dict[str, str]:
    """Every break of the two shape rules under ``root``'s product packages: a stable key (file and
    name, as ``PENDING`` spells it) mapped to where it is and why."""
    found: dict[str, str] = {}
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root)
            module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(relative))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > LONGEST:
                        found[f"{relative.as_posix()}: {node.name}() is too long"] = (
                            f"{relative.as_posix()}:{node.lineno} {node.name}() has {lines} lines (at most {LONGEST})"
                        )
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    if node.module.split(".")[0] not in PRODUCT or node.module == module:
                        continue
                    for alias in node.names:
                        if alias.name.startswith("_") and not alias.name.startswith("__"):
                            found[f"{relative.as_posix()}: imports {node.module}.{alias.name}"] = (
                                f"{relative.as_posix()}:{node.lineno} imports {node.module}.{alias.name}"
                                " (promote it to a public name, or move the caller)"
                            )
    return found


def test_the_product_keeps_its_shape() -> None:
    """No function over 80 lines (name its steps) and no import of another module's ``_private`` name
    (promote it or move the caller); only the offenders in ``PENDING`` are let through."""
    found = shape_offenders(REPO)
    new = sorted(found[key] for key in found.keys() - PENDING)
    stale = sorted(PENDING - found.keys())
    assert not new, "shape rules broken:\n  " + "\n  ".join(new)
    assert not stale, "fixed, so take these out of PENDING:\n  " + "\n  ".join(stale)


def test_the_shape_rules_see_what_they_forbid(tmp_path: Path) -> None:
    (tmp_path / "services" / "area").mkdir(parents=True)
    body = "".join(f"    x{n} = {n}\n" for n in range(LONGEST - 1))
    (tmp_path / "services" / "area" / "one.py").write_text(
        "from services.area.two import _hidden, __version__, shown\n"
        "from services.area.one import _mine\n"
        "from os import _exit\n"
        f"def fits():\n{body}\n"
        f"async def too_long():\n{body}    x = 0\n",
        encoding="utf-8",
    )
    assert set(shape_offenders(tmp_path)) == {
        "services/area/one.py: imports services.area.two._hidden",
        "services/area/one.py: too_long() is too long",
    }


def test_no_controller_calls_the_app_from_a_thread() -> None:
    """Workers post messages (``widgets.messages``); ``call_from_thread`` in app/ would bring back
    thread workers that reach into the App."""
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "app").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"\bcall_from_thread\b", line)
    ]
    assert offenders == []


def test_the_contracts_count_type_only_imports() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert config["exclude_type_checking_imports"] is False
    assert any(c["type"] == "acyclic_siblings" for c in config["contracts"])


def test_no_module_circles_counting_type_only_imports() -> None:
    """The contracts see packages; this sees modules: no two modules of ours import each other, even
    through a chain and even when one side imports only for type checking."""
    import grimp

    graph = grimp.build_graph(
        "services", "app", "screens", "widgets", exclude_type_checking_imports=False, cache_dir=None
    )
    modules = sorted(graph.modules)
    edges = {m: sorted(i for i in graph.find_modules_directly_imported_by(m) if i in graph.modules) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    assert circles == []


def _id_keyed_module_dicts(source: str, where: str) -> list[str]:
    """``NAME[id(…)]`` or ``NAME.get/pop/setdefault(id(…))`` where NAME is assigned at module level (a
    cache that outlives its keys: ``id()`` is reused once an object is gone). A tuple key holding an
    ``id(…)`` counts too; a dict local to a function (``sizes[id(c)]``) does not."""
    import ast

    tree = ast.parse(source)
    module_names: set[str] = set()
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        module_names.update(t.id for t in targets if isinstance(t, ast.Name))

    def is_id_call(node: ast.expr) -> bool:
        if isinstance(node, ast.Tuple):
            return any(is_id_call(e) for e in node.elts)
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "id"

    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            if node.value.id in module_names and is_id_call(node.slice):
                found.append(f"{where}:{node.lineno} {node.value.id}[id(...)]")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            owner, method = node.func.value, node.func.attr
            if isinstance(owner, ast.Name) and owner.id in module_names and method in ("get", "pop", "setdefault"):
                if is_id_call(node.args[0]):
                    found.append(f"{where}:{node.lineno} {owner.id}.{method}(id(...))")
    return found


def test_no_module_dict_is_keyed_by_id() -> None:
    """A cache lives on the object that owns what it derives from (the tool offer on the tool registry,
    forgotten on rebind), not in a module dict keyed by ``id()``, which a new object can reuse."""
    sample = (
        "_CACHE: dict[int, int] = {}\n_LIVE = {}\n"
        "def f(x):\n    sizes = {}\n    sizes[id(x)] = 1\n    _LIVE[id(x)] = 1\n"
        "    return _CACHE.get(id(x)), _CACHE[(id(x), 2)]\n"
    )
    assert sorted(_id_keyed_module_dicts(sample, "sample")) == [
        "sample:6 _LIVE[id(...)]",
        "sample:7 _CACHE.get(id(...))",
        "sample:7 _CACHE[id(...)]",
    ]
    offenders = [
        hit
        for package in ("app", "screens", "widgets", "services")
        for path in sorted((REPO / package).rglob("*.py"))
        for hit in _id_keyed_module_dicts(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert offenders == []
