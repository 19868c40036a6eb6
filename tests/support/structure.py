"""The package's structure in figures, as docs/architecture.md gives them: `python -m tests.support.structure`.

A room is what the package's root holds: a module, or a folder with everything in it. An arrow is one
room importing another (however many imports make it); a floor is a room's height above what it
imports (the ground is 1); upward is an import against the layer table; a circle is rooms importing
each other. Read by grimp from the code's imports, lazy and type-checking ones included.
"""

from __future__ import annotations

import graphlib
from functools import cache

from tests.unit.test_architecture import PACKAGE, graph, imports, layer_of


def room_of(module: str) -> str:
    return ".".join(module.split(".")[:2])


@cache
def arrows() -> frozenset[tuple[str, str]]:
    return frozenset(
        (room_of(importer), room_of(imported))
        for importer, imported in imports()
        if room_of(importer) != room_of(imported)
        and room_of(importer) != PACKAGE
        and room_of(imported) != PACKAGE
    )


def rooms() -> list[str]:
    return sorted({room_of(module) for module in graph().modules} - {PACKAGE})


def floors() -> dict[str, int]:
    below: dict[str, set[str]] = {room: set() for room in rooms()}
    for importer, imported in arrows():
        below[importer].add(imported)
    height: dict[str, int] = {}
    for room in graphlib.TopologicalSorter(below).static_order():
        height[room] = 1 + max((height[other] for other in below[room]), default=0)
    return height


def upward() -> list[tuple[str, str]]:
    return sorted(
        (importer, imported)
        for importer, imported in imports()
        if (low := layer_of(importer)) is not None and (high := layer_of(imported)) is not None and high < low
    )


def main() -> None:
    try:
        height = floors()
        circles = 0
    except graphlib.CycleError:
        height, circles = {}, 1
    print(
        f"rooms {len(rooms())}, arrows {len(arrows())}, floors {max(height.values(), default=0)}, "
        f"upward {len(upward())}, circles {circles}"
    )
    for room in sorted(height, key=lambda r: (-height[r], r)):
        print(f"  floor {height[room]:2d}  {room}")


if __name__ == "__main__":
    main()
