"""Fail when the top-level parts of ale_robotics import each other in a cycle.

The graph's nodes are the direct children of ``ale_robotics`` (sub-packages and
top-level modules: ``evaluator``, ``rollouts``, ``tasks``, ``model``, ``seeds``...);
an edge ``a -> b`` is any import, at module level or inside a function, of
something in ``b`` by something in ``a``. Imports under ``if TYPE_CHECKING:`` are
left out (they never run). Import-linter's contracts (``.importlinter``) check the
layers we chose; this checks that no cycle exists at all, including between
parts no contract names. Run by ``make lint`` and by tests/test_package_cycles.py.

Usage: python scripts/check_package_cycles.py [PACKAGE]   (exit 1 naming each cycle)
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping, Set

import grimp

__all__ = ["find_cycles", "package_cycles", "part_graph"]


def part_graph(package: str) -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """The graph of ``package``'s direct children, and one example import per edge
    (``"a.x:12 imports b.y"``) to name in a message."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=True, cache_dir=None)
    depth = package.count(".") + 1

    def part(module: str) -> str | None:
        names = module.split(".")
        return names[depth] if len(names) > depth else None

    edges: dict[str, set[str]] = {}
    examples: dict[tuple[str, str], str] = {}
    for importer in sorted(graph.modules):
        a = part(importer)
        if a is None:
            continue
        edges.setdefault(a, set())
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            b = part(imported)
            if b is None or b == a:
                continue
            edges[a].add(b)
            if (a, b) not in examples:
                details = graph.get_import_details(importer=importer, imported=imported)
                line = f":{details[0]['line_number']}" if details else ""
                examples[(a, b)] = f"{importer}{line} imports {imported}"
    return edges, examples


def _strongly_connected(edges: Mapping[str, Set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one node, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _cycle_through(start: str, component: Set[str], edges: Mapping[str, Set[str]]) -> list[str]:
    """A shortest cycle from ``start`` back to it inside ``component`` (breadth first)."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(edges.get(node, ())):
                if nxt not in component:
                    continue
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is in a cycle but none was found")  # pragma: no cover


def find_cycles(edges: Mapping[str, Set[str]]) -> list[list[str]]:
    """One cycle per group of parts that import each other, e.g. ``[a, b, c, a]``."""
    return [_cycle_through(c[0], set(c), edges) for c in _strongly_connected(edges)]


def package_cycles(package: str = "ale_robotics") -> list[str]:
    """Each cycle between ``package``'s parts, named with an import of each step."""
    edges, examples = part_graph(package)
    messages = []
    for knot, cycle in zip(_strongly_connected(edges), find_cycles(edges), strict=True):
        steps = "\n".join(
            f"    {a} -> {b}: {examples[(a, b)]}" for a, b in itertools.pairwise(cycle)
        )
        others = ", ".join(sorted(set(knot) - set(cycle)))
        also = f" (also in this knot: {others})" if others else ""
        messages.append(f"{' -> '.join(cycle)}{also}\n{steps}")
    return messages


def main(argv: list[str]) -> int:
    package = argv[1] if len(argv) > 1 else "ale_robotics"
    cycles = package_cycles(package)
    if not cycles:
        print(f"no import cycle between the parts of {package} (TYPE_CHECKING imports left out)")
        return 0
    print(f"{len(cycles)} import cycle(s) between the parts of {package}:", file=sys.stderr)
    for message in cycles:
        print(f"  {message}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
