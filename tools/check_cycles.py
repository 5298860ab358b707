"""Fail when any two dpsense modules import each other, directly or through others (``make lint``).

import-linter's layer contracts forbid imports *between* layers going up; this check forbids cycles
*inside* a package too (deferred imports inside functions and ``TYPE_CHECKING`` imports count: a
cycle hidden in a function is still a cycle a reader has to untangle). It prints every strongly
connected component of the module import graph with more than one module and exits 1 if there is one.
"""

from __future__ import annotations

import sys

import grimp


def cycles(package: str) -> list[list[str]]:
    """The strongly connected components (more than one module) of ``package``'s import graph (Tarjan)."""
    graph = grimp.build_graph(package)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def main() -> int:
    """Print every cycle; exit status 1 when there is one."""
    found = cycles("dpsense")
    for component in found:
        print("import cycle: " + " <-> ".join(component))
    print(f"import cycles: {len(found)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
