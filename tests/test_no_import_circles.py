"""No module of playground, scenarios or runtime imports itself back through others.

docs/design.md: an arrow only points down. Inside a lesson package too: params.py at
the bottom, the mechanism, the Program, the prediction and the metrics above it,
lesson.py at the top, imported by nothing of its package. A circle is how that
order breaks, often hidden behind an import under TYPE_CHECKING or inside a
function; grimp (import-linter's graph) counts both kinds, so hiding one does not
pass here.
"""

from __future__ import annotations

import grimp

PACKAGES = ("scenarios", "runtime", "playground")


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """One shortest cycle per set of modules that import each other, `a, b, …, a`:
    for every import a -> b, the shortest chain from b back to a, if any."""
    found: dict[frozenset[str], list[str]] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is None:
                continue
            cycle = [importer, *back]
            key = frozenset(cycle)
            if key not in found or len(cycle) < len(found[key]):
                found[key] = cycle
    return sorted(found.values())


def described(graph: grimp.ImportGraph, cycle: list[str]) -> str:
    """`a -> b (line 12: from b import X) -> a (…)`: the import lines that tie it."""
    parts = [cycle[0]]
    for importer, imported in zip(cycle, cycle[1:], strict=False):
        details = graph.get_import_details(importer=importer, imported=imported)
        lines = "; ".join(f"line {d['line_number']}: {d['line_contents']}" for d in details)
        parts.append(f"-> {imported} ({lines})")
    return " ".join(parts)


def test_no_module_imports_itself_back() -> None:
    graph = grimp.build_graph(*PACKAGES)
    found = circles(graph)
    said = [described(graph, cycle) for cycle in found]
    assert not found, "import circles:\n" + "\n".join(said)
