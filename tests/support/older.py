"""A runtime from before issue 25's narrowed page listing, for the completions' test and benchmark."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from mnote_mcp.kernel.port import PageRef, PagesQuery
from mnote_mcp.kernel.store.kernel import StoreKernel


class WholeListingKernel(StoreKernel):
    """Ignores `list_pages`'s prefix, workspace and limit, as a runtime older than them does: it lists
    every page the caller may read."""

    async def list_pages(self, query: PagesQuery) -> list[PageRef]:
        return await super().list_pages(PagesQuery(query.actor_id))


@contextmanager
def whole_listing() -> Iterator[None]:
    """Servers made meanwhile (`helpers.make_app` on a store path) run on a `WholeListingKernel`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("tests.support.helpers.StoreKernel", WholeListingKernel)
        yield
