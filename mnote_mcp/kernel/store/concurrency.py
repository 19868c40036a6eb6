"""Optimistic concurrency: is a command's `baseRevision` still good enough to go ahead?

Page-level for whole-page commands: any other revision is a conflict. Block-level for the block
commands: a stale `baseRevision` is fine when none of the blocks the command relies on (its
`depends`) changed after it (a row's `revision` is the last write that changed that block; a block
deleted since is found in the history); the outcome then says `rebasedFrom`. Otherwise the conflict
names each block and the revision that changed it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mnote_mcp.kernel.errors import ErrorCode, MnoteError, Reason
from mnote_mcp.kernel.store import history

if TYPE_CHECKING:  # (importing `commands.spec` loads every command: a read needs none)
    from mnote_mcp.kernel.store.commands.spec import CommandSpec, P
    from mnote_mcp.kernel.store.plan import Tx


def check_base(tx: Tx, spec: CommandSpec[P], payload: P) -> int | None:
    """Optimistic concurrency. A stale `baseRevision` is a conflict, except for a block edit none of
    whose blocks changed since that revision: it goes ahead, and the result says `rebasedFrom`."""
    base, current = tx.command.base_revision, tx.page.revision
    if base is None or base == current:
        return None
    if spec.depends is None or base > current:
        raise MnoteError(
            ErrorCode.CONFLICT, Reason.REVISION, {"currentRevision": current, "baseRevision": base}
        )
    depends = list(dict.fromkeys(spec.depends(tx, payload)))
    found = tx.blocks.get_many(depends)
    changed = {block_id: row.revision for block_id, row in found.items() if row.revision > base}
    missing = [block_id for block_id in depends if block_id not in found]
    changed.update(history.deleted_after(tx.conn, tx.page.workspace_id, tx.page.id, missing, base))
    if changed:
        conflicts = [{"blockId": block_id, "revision": changed[block_id]} for block_id in sorted(changed)]
        raise MnoteError(
            ErrorCode.CONFLICT,
            Reason.BLOCKS,
            {
                "currentRevision": current,
                "baseRevision": base,
                "conflicts": conflicts,
                "blockIds": [c["blockId"] for c in conflicts],
            },
        )
    return base
