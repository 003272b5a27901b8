"""The source tree's structure in figures: who imports tau2, import circles, long files.

    python bench/structure.py            # figures and the offenders; exit 1 when a target is missed

Reads src/tau2_a2a's imports as written (every `import` and `from ... import`,
at any depth, also inside functions and TYPE_CHECKING blocks), nothing run:
- the modules that import tau2 itself (the target: one, the seam's imports.py; the rest of the code calls
  distribution.py, which passes on its names and those of the half for the installed tau2);
- import circles between modules of the package (the target: none);
- rooms (folders) importing each other both ways (the target: none);
- source files over 500 lines (the target: none).
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "tau2_a2a"
MAX_LINES = 500
SEAM = ["tau2_a2a.tau2bench.seam.imports"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules: set[str]) -> tuple[set[str], bool]:
    """The package's modules `path` imports, and whether it imports tau2 itself."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    tau2 = False
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            if name == "tau2" or name.startswith("tau2."):
                tau2 = True
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module_name(path):
                found.add(name)
    return found, tau2


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def room(module: str) -> str:
    """A module's room: its folder under the package, or itself when it sits at the package's root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(package)"


def main() -> int:
    files = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(path) for path in files}
    graph: dict[str, set[str]] = {}
    tau2_importers = []
    for path in files:
        graph[module_name(path)], tau2 = imports_of(path, modules)
        if tau2:
            tau2_importers.append(module_name(path))
    # A package's __init__ is imported with each of its modules; an edge into a package is one into its __init__.
    module_circles = circles({name: {t for t in targets if not name.startswith(t + ".")}
                              for name, targets in graph.items()})
    rooms: dict[str, set[str]] = defaultdict(set)
    for name, targets in graph.items():
        for target in targets:
            if room(target) != room(name):
                rooms[room(name)].add(room(target))
    room_circles = circles(rooms)
    long_files = [(len(path.read_text().splitlines()), path.relative_to(ROOT)) for path in files]
    long_files = sorted((item for item in long_files if item[0] > MAX_LINES), reverse=True)

    outside = [name for name in tau2_importers if name not in SEAM]
    print(f"modules that import tau2: {len(tau2_importers)} ({', '.join(tau2_importers) or '-'}); "
          f"outside the seam: {len(outside)}")
    print(f"import circles between modules: {len(module_circles)}")
    for circle in module_circles:
        print(f"  {' <-> '.join(circle)}")
    print(f"rooms importing each other: {len(room_circles)}")
    for circle in room_circles:
        print(f"  {' <-> '.join(circle)}")
    print(f"source files over {MAX_LINES} lines: {len(long_files)}")
    for lines, path in long_files:
        print(f"  {path}: {lines}")
    largest = max((len(path.read_text().splitlines()), path.relative_to(ROOT)) for path in files)
    print(f"largest source file: {largest[1]} ({largest[0]} lines); {len(files)} source files")
    missed = outside or module_circles or room_circles or long_files
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
