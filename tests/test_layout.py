"""The package layout: wings by job, imports in one direction, no import circles.

Reads every module's imports (module level and inside functions) with ``ast``, resolves relative
imports, and checks the rules each wing's ``__init__`` docstring states.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "render_service"
WINGS = ("protocol", "tokens", "render", "derender", "serving", "testing")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """Module → the ``render_service`` modules it imports (``from x import name`` counts the
    submodule ``x.name`` when that is a module, else ``x``)."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("render_service"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith("render_service"):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    deps.add(sub if sub in modules else target)
        deps.discard(name)
        graph[name] = {d for d in deps if d in modules}
    return graph


GRAPH = _imports()


def _wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in WINGS else "base"


def _importers(wing: str) -> dict[str, set[str]]:
    return {m: deps for m, deps in GRAPH.items() if _wing(m) == wing}


def test_every_wing_exists_and_says_what_it_may_import() -> None:
    for wing in WINGS:
        init = PKG / wing / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc, f"{wing}/__init__.py has no docstring"
        assert "import" in doc, f"{wing}/__init__.py does not say what the wing may import"


def test_protocol_imports_nothing_of_ours() -> None:
    for module, deps in _importers("protocol").items():
        outside = {d for d in deps if _wing(d) != "protocol"}
        assert not outside, f"{module} imports {sorted(outside)}"


@pytest.mark.parametrize("wing", ["tokens", "render", "derender", "testing"])
def test_lower_wings_never_import_serving(wing: str) -> None:
    for module, deps in _importers(wing).items():
        bad = {d for d in deps if _wing(d) == "serving"}
        assert not bad, f"{module} imports {sorted(bad)}"


@pytest.mark.parametrize(("wing", "other"), [("render", "derender"), ("derender", "render")])
def test_render_and_derender_do_not_import_each_other(wing: str, other: str) -> None:
    for module, deps in _importers(wing).items():
        bad = {d for d in deps if _wing(d) == other}
        assert not bad, f"{module} imports {sorted(bad)}"


def test_tokens_import_only_the_lowest_base_modules() -> None:
    allowed = {"render_service.errors", "render_service.settings", "render_service.memory"}
    for module, deps in _importers("tokens").items():
        bad = {d for d in deps if _wing(d) != "tokens" and d not in allowed}
        assert not bad, f"{module} imports {sorted(bad)}"


def test_base_modules_import_no_wing_above_tokens() -> None:
    for module, deps in _importers("base").items():
        if module in ("render_service", "render_service.__main__"):
            continue  # the package entry points re-export serving's create_app / main
        bad = {d for d in deps if _wing(d) in ("render", "derender", "serving", "testing")}
        assert not bad, f"{module} imports {sorted(bad)}"


def test_no_import_circles() -> None:
    """Tarjan's strongly connected components over the module graph: every one is a single
    module (a package ``__init__`` re-exporting its own submodules is not a circle)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def edges(module: str) -> set[str]:
        # a package __init__ importing its own submodules is how re-exports work, not a circle
        return {d for d in GRAPH[module] if not d.startswith(module + ".")}

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert not circles, f"import circles: {circles}"


def test_the_graph_was_read() -> None:
    """Guard against a test that passes because it saw nothing."""
    assert len(GRAPH) > 30
    assert "render_service.derender.pipeline" in GRAPH["render_service.derender.chat"]
    assert "render_service.models" in GRAPH["render_service.render.chat"]
