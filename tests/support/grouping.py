"""Which tests share an xdist worker: those that share a module-scoped fixture.

Under `-n` with `--dist loadgroup` (pyproject.toml) the tests of one `xdist_group` run on one worker;
the rest go wherever a worker is free. A module-scoped fixture (a Hermes session, a server the module
shares, an authorization server, a database filled once) is made once per worker that needs it, so the
tests that use it are grouped: `tests/conftest.py` groups them from their fixtures, joining the groups
of fixtures a test uses together. A test that reaches such a fixture only through
`request.getfixturevalue` says so with `sharing(__file__, "fixture")` on itself or its parameter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
SHARED_SCOPES = frozenset({"module", "package", "class"})  # made once for many tests; not "session"


def group_name(module: Path | str, fixture: str) -> str:
    path = Path(module).resolve()
    where = (
        path.relative_to(TESTS.parent) if path.is_relative_to(TESTS.parent) else path
    )  # (a scratch test's)
    return f"{where.as_posix()}::{fixture}"


def sharing(module: str, fixture: str) -> pytest.MarkDecorator:
    """The mark of a test (or parameter) that uses `fixture` of `module` without naming it."""
    return pytest.mark.xdist_group(group_name(module, fixture))


def assign_groups(items: list[pytest.Item]) -> None:
    """Give every test that uses a module-scoped fixture the `xdist_group` of its module's fixtures
    used together (one group for fixtures one test uses at once), named after the first of them; a
    parametrized one is one fixture per parameter; one another such fixture is made from counts as
    that one (a module's shared paths under each parameter of its servers do not join them)."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    uses: dict[pytest.Item, list[str]] = {}
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        info = getattr(item, "_fixtureinfo", None)  # pytest's record of the test's fixtures
        if info is None:
            continue
        module = str(item.path)
        indices = getattr(getattr(item, "callspec", None), "indices", {})
        definitions = {name: defs[-1] for name, defs in info.name2fixturedefs.items() if defs}
        made_once = {name for name, definition in definitions.items() if definition.scope in SHARED_SCOPES}
        beneath = {  # made once only for another fixture made once: grouped with that one
            dependency
            for name in made_once
            for dependency in definitions[name].argnames
            if dependency in made_once
        }
        shared = [
            group_name(module, name) + (f"[{indices[name]}]" if name in indices else "")
            for name in sorted(made_once - beneath)
        ]
        for name in shared:
            parent.setdefault(name, name)
        for name in shared[1:]:
            first, other = root(shared[0]), root(name)
            if first != other:
                parent[max(first, other)] = min(first, other)
        if shared:
            uses[item] = shared
    for item, shared in uses.items():
        item.add_marker(pytest.mark.xdist_group(root(shared[0])))
