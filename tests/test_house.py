"""The shape the house issue promised, kept: the App stays small, no controller calls back into the
App from a thread, and the import contracts count type-only imports (no circle hides behind
``TYPE_CHECKING``)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_app_stays_small() -> None:
    lines = (REPO / "app" / "aries_app.py").read_text(encoding="utf-8").count("\n")
    assert lines <= 305, f"app/aries_app.py has {lines} lines: move the new concern into app/commands or a pane"


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

    graph = grimp.build_graph("services", "app", "screens", "widgets", exclude_type_checking_imports=False)
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
