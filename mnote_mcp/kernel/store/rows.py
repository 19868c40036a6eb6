"""A page's blocks as rows: reading what a command needs, and writing the rows it changes.

One row per block (`blocks` table): its parent (`''` at the top level), its order key among its
siblings, type, text, props, and the page revision that last changed it. A precise edit reads the few
rows it names (and their neighbours and ancestors, by index), a whole-page read assembles the tree
from one ordered query, and a write touches only the rows it changes.

Every change of a row is a `BlockChange` (the row before and after; None when it did not or no longer
exists). The list of them is the write's change set: it goes to the page history and, as a
`changes.PageChange`, down the one page-change path to the search index and the change feed.

A row read from the table carries its `seq`, the number the database gave it when it was written (what
both search indexes order and find a block's entry by); a row made in memory (a new block, one rebuilt
from the history) has none (0) until it is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import orjson

from mnote_mcp.kernel.blocks import Block, Props, block_not_found
from mnote_mcp.kernel.diff import BlockOp
from mnote_mcp.kernel.limits import block_bytes
from mnote_mcp.kernel.store.encoding import dumps
from mnote_mcp.kernel.store.orderkeys import keys_between, too_long
from mnote_mcp.kernel.store.sql import Connection, Cursor

TOP = ""  # the parent of top-level blocks
COLUMNS = (
    "id, parent_id, position, type, text, props, revision, seq"  # a `BlockRow`, as `BlockRow.of` reads it
)
_CHUNK = 500  # ids per IN (...) list, well below every database's parameter limit
# Blocks named by one call (a delete, a subset read) whose subtrees are read one query each; more
# are found in one read of the whole page: a query per block is ~30 us, 20,000 of them half a second.
FEW_IDS = 64


@dataclass(frozen=True, slots=True)
class BlockRow:
    """One block as stored: content and place, without its children."""

    id: str
    parent_id: str
    position: str
    type: str
    text: str
    props: Props
    revision: int
    seq: int = field(default=0, compare=False)  # the row's number in the table (0: not written yet)

    @classmethod
    def of(cls, row: Sequence[Any]) -> BlockRow:
        """A row of `SELECT {COLUMNS}`."""
        block_id, parent, position, kind, text, props, revision, seq = row
        return cls(
            block_id, parent, position, kind, text, orjson.loads(props) if props else {}, revision, seq
        )

    def block(self) -> Block:
        """The canonical block (`props` omitted when empty), without children."""
        block: Block = {"id": self.id, "type": self.type, "text": self.text}
        if self.props:
            block["props"] = dict(self.props)
        return block

    @property
    def size(self) -> int:
        return block_bytes(self.id, self.type, self.text, self.props)

    def image(self) -> list[Any]:
        """What the history keeps of a row: `[parent, position, type, text, props|null]`."""
        return [self.parent_id, self.position, self.type, self.text, self.props or None]

    @classmethod
    def from_image(cls, block_id: str, image: Sequence[Any], revision: int) -> BlockRow:
        parent, position, kind, text, props = image
        return cls(block_id, parent, position, kind, text, dict(props or {}), revision)

    def same_content(self, other: BlockRow) -> bool:
        return (self.type, self.text, self.props) == (other.type, other.text, other.props)

    def same_place(self, other: BlockRow) -> bool:
        return (self.parent_id, self.position) == (other.parent_id, other.position)


@dataclass(frozen=True, slots=True)
class BlockChange:
    """A row inserted (`before` None), deleted (`after` None), or changed in content or place.

    `rekey` marks a row whose order key alone was renumbered (its siblings were respaced): the block
    did not change, so its revision stays and no diff or conflict names it.
    """

    id: str
    before: BlockRow | None
    after: BlockRow | None
    rekey: bool = False

    def to_wire(self) -> list[Any]:
        entry = [
            self.id,
            self.before.image() if self.before else None,
            self.after.image() if self.after else None,
        ]
        return [*entry, 1] if self.rekey else entry


def ids_in_chunks(ids: Sequence[str]) -> Iterator[tuple[str, list[str]]]:
    """`id IN (?, ...)` and its parameters, a few hundred ids at a time (below every database's limit)."""
    for start in range(0, len(ids), _CHUNK):
        chunk = list(ids[start : start + _CHUNK])
        yield f"id IN ({', '.join('?' * len(chunk))})", chunk


def assemble(rows: Iterable[Sequence[Any]]) -> list[Block]:
    """The block tree from `(id, parent, type, text, props)` rows given in sibling order per parent."""
    kids: dict[str, list[Block]] = {}
    for block_id, parent, kind, text, props in rows:
        block: Block = {"id": block_id, "type": kind, "text": text}
        if props is not None:
            block["props"] = orjson.loads(props)
        siblings = kids.get(parent)
        if siblings is None:
            kids[parent] = siblings = []
        siblings.append(block)
    return _link(kids)


def tree_of(rows: Iterable[BlockRow]) -> list[Block]:
    """The block tree of any set of rows (ordered here by parent and order key)."""
    kids: dict[str, list[Block]] = {}
    for row in sorted(rows, key=lambda row: (row.parent_id, row.position)):
        kids.setdefault(row.parent_id, []).append(row.block())
    return _link(kids)


def subtree_of(rows: list[BlockRow]) -> Block:
    """The block (with its children) whose subtree `rows` are, root first (`PageBlocks.subtree`)."""
    kids: dict[str, list[Block]] = {}
    root = rows[0].block()
    for row in rows[1:]:
        kids.setdefault(row.parent_id, []).append(row.block())
    kids[rows[0].parent_id] = [root]
    return _link(kids, rows[0].parent_id)[0]


def _link(kids: dict[str, list[Block]], top: str = TOP) -> list[Block]:
    for siblings in kids.values():
        for block in siblings:
            children = kids.get(block["id"])
            if children:
                block["children"] = children
    return kids.get(top, [])


@dataclass
class PageBlocks:
    """The rows of one page, read on demand inside a transaction (and remembered for its length)."""

    conn: Connection
    workspace_id: str
    page_id: str
    _rows: dict[str, BlockRow | None] = field(default_factory=dict)
    _all: list[BlockRow] | None = None
    _parents: dict[str, bool] = field(default_factory=dict)  # block id -> has children (asked for)
    _asked: list[tuple[list[str], Cursor]] = field(default_factory=list)

    @classmethod
    def asking(
        cls,
        conn: Connection,
        workspace_id: str,
        page_id: str,
        named: Callable[[Any], list[str]] | None,
        payload: Any,
    ) -> PageBlocks:
        """The page's rows, those a command's payload names (`CommandSpec.named`) asked for at once."""
        blocks = cls(conn, workspace_id, page_id)
        if named is not None:
            blocks.ask(named(payload))
        return blocks

    def ask(self, ids: Iterable[str]) -> None:
        """Ask now for these rows, each with whether it has children, and read the answer when a row
        is first wanted: on PostgreSQL a write sends the question with its page lock and checkpoints
        (`Store.run_command`), one round trip for all of them instead of one per question. A few ids
        only (`FEW_IDS`); the rows are the transaction's as any other read of them."""
        wanted = [block_id for block_id in dict.fromkeys(ids) if block_id not in self._rows]
        if not wanted or len(wanted) > FEW_IDS or self._all is not None:
            return
        joined = ", ".join(f"b.{column.strip()}" for column in COLUMNS.split(","))
        rows = self.conn.execute(
            f"SELECT {joined}, EXISTS (SELECT 1 FROM blocks c WHERE c.workspace_id = b.workspace_id"
            " AND c.page_id = b.page_id AND c.parent_id = b.id)"
            f" FROM blocks b WHERE b.workspace_id = ? AND b.page_id = ? AND b.id IN ({', '.join('?' * len(wanted))})"
            " ORDER BY b.id",  # (the index by id, as `get_many`)
            (self.workspace_id, self.page_id, *wanted),
        )
        self._asked.append((wanted, rows))

    def close(self) -> None:
        """Close what `ask` asked and nobody read (see `Store.run_command`)."""
        while self._asked:
            self._asked.pop(0)[1].close()

    def _answers(self) -> None:
        """Read the answer to what `ask` asked (before any other read of the rows)."""
        while self._asked:
            wanted, rows = self._asked.pop(0)
            for *found, parent in rows.fetchall():
                row = BlockRow.of(found)
                self._rows.setdefault(row.id, row)
                self._parents[row.id] = bool(parent)
            for block_id in wanted:
                self._rows.setdefault(block_id, None)

    def _select(self, where: str, params: Sequence[Any], order: str = "") -> list[BlockRow]:
        self._answers()
        rows = self.conn.execute(
            f"SELECT {COLUMNS} FROM blocks WHERE workspace_id = ? AND page_id = ? AND {where}{order}",
            (self.workspace_id, self.page_id, *params),
        ).fetchall()
        found = [BlockRow.of(row) for row in rows]
        for row in found:
            self._rows[row.id] = row
        return found

    def get(self, block_id: str) -> BlockRow | None:
        self._answers()
        if block_id not in self._rows:
            if self._all is not None:
                return None
            found = self._select("id = ?", (block_id,))
            self._rows[block_id] = found[0] if found else None
        return self._rows[block_id]

    def get_many(self, ids: Iterable[str]) -> dict[str, BlockRow]:
        """The rows of those ids that exist."""
        self._answers()
        wanted = [block_id for block_id in dict.fromkeys(ids) if block_id not in self._rows]
        if self._all is None:
            for where, chunk in ids_in_chunks(wanted):
                # ORDER BY id: the planner then reads `blocks_by_id`, not the whole page, for an IN list
                self._select(where, chunk, " ORDER BY id")
                for block_id in chunk:
                    self._rows.setdefault(block_id, None)
        return {
            block_id: row for block_id in dict.fromkeys(ids) if (row := self._rows.get(block_id)) is not None
        }

    def exists(self, block_id: str) -> bool:
        return self.get(block_id) is not None

    def children(
        self, parent_id: str, *, after: str | None = None, limit: int | None = None
    ) -> list[BlockRow]:
        """Children of `parent_id` in order (those after the order key `after`; at most `limit`)."""
        where, params = "parent_id = ?", [parent_id]
        if after is not None:
            where += " AND position > ?"
            params.append(after)
        order = " ORDER BY position" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return self._select(where, params, order)

    def sibling(self, row: BlockRow, *, following: bool) -> BlockRow | None:
        """The sibling right after (or before) `row`."""
        op, order = (">", "ASC") if following else ("<", "DESC")
        found = self._select(
            f"parent_id = ? AND position {op} ?",
            (row.parent_id, row.position),
            f" ORDER BY position {order} LIMIT 1",
        )
        return found[0] if found else None

    def edge_child(self, parent_id: str, *, last: bool) -> BlockRow | None:
        """The first (or last) child of `parent_id`."""
        found = self._select(
            "parent_id = ?",
            (parent_id,),
            f" ORDER BY position {'DESC' if last else 'ASC'} LIMIT 1",
        )
        return found[0] if found else None

    def has_children(self, block_id: str) -> bool:
        self._answers()
        known = self._parents.get(block_id)
        if known is not None:
            return known
        row = self.conn.execute(
            "SELECT 1 FROM blocks WHERE workspace_id = ? AND page_id = ? AND parent_id = ? LIMIT 1",
            (self.workspace_id, self.page_id, block_id),
        ).fetchone()
        return row is not None

    def ancestors(self, block_id: str) -> list[BlockRow]:
        """The rows above `block_id`, nearest first (it must exist)."""
        out: list[BlockRow] = []
        row = self.get(block_id)
        while row is not None and row.parent_id != TOP:
            row = self.get(row.parent_id)
            if row is not None:
                out.append(row)
        return out

    def depth(self, block_id: str) -> int:
        return 1 + len(self.ancestors(block_id))

    def path(self, block_id: str) -> tuple[str, ...]:
        """The order keys from the top down to `block_id`: sorting by it is document order."""
        row = self.get(block_id)
        assert row is not None
        return (*(a.position for a in reversed(self.ancestors(block_id))), row.position)

    def within(self, block_id: str, ancestor_id: str) -> bool:
        """Whether `block_id` is `ancestor_id` or one of its descendants."""
        return block_id == ancestor_id or any(a.id == ancestor_id for a in self.ancestors(block_id))

    def subtree(self, block_id: str) -> list[BlockRow]:
        """`block_id` and every block under it, in document order (one recursive query)."""
        self._answers()
        joined = ", ".join(f"b.{column.strip()}" for column in COLUMNS.split(","))
        rows = self.conn.execute(
            f"WITH RECURSIVE sub AS (SELECT {COLUMNS} FROM blocks"
            f" WHERE workspace_id = ? AND page_id = ? AND id = ?"
            f" UNION ALL SELECT {joined} FROM blocks b JOIN sub"
            f" ON b.workspace_id = ? AND b.page_id = ? AND b.parent_id = sub.id)"
            f" SELECT {COLUMNS} FROM sub",
            (self.workspace_id, self.page_id, block_id, self.workspace_id, self.page_id),
        ).fetchall()
        found = [BlockRow.of(row) for row in rows]
        for row in found:
            self._rows[row.id] = row
        return in_document_order(found, block_id)

    def all(self) -> list[BlockRow]:
        """Every row of the page, in sibling order per parent."""
        if self._all is None:
            self._all = self._select("1 = 1", (), " ORDER BY parent_id, position")
            self._rows = {row.id: row for row in self._all}
        return self._all

    def in_page_order(self) -> list[BlockRow]:
        """Every row of the page in document order (each parent before its children)."""
        kids: dict[str, list[BlockRow]] = {}
        for row in self.all():  # in sibling order per parent
            kids.setdefault(row.parent_id, []).append(row)
        return [row for top in kids.get(TOP, []) for row in _preorder(top, kids)]

    def named_subtrees(self, ids: Sequence[str]) -> list[list[BlockRow]]:
        """The subtrees (rows, root first, in document order) of the named blocks, which must exist,
        in document order, each once: a block inside another named one comes with that one. Up to
        `FEW_IDS` blocks are read by index, with their ancestors; more, the whole page, once."""
        chosen = set(ids)
        if len(chosen) <= FEW_IDS:
            roots = [bid for bid in chosen if not any(a.id in chosen for a in self.ancestors(bid))]
            roots.sort(key=self.path)
            return [self.subtree(root) for root in roots]
        kids: dict[str, list[BlockRow]] = {}
        for row in self.all():  # in sibling order per parent
            kids.setdefault(row.parent_id, []).append(row)
        out: list[list[BlockRow]] = []
        stack = list(reversed(kids.get(TOP, [])))
        while stack:  # the tree in document order, down to the first named block of each branch
            row = stack.pop()
            if row.id in chosen:
                out.append(_preorder(row, kids))
            else:
                stack += reversed(kids.get(row.id, []))
        return out

    def select(self, wanted: Sequence[str]) -> list[Block]:
        """The blocks asked for (each with its children) in document order, each once: one inside
        another asked-for block comes with its ancestor. A missing id is `not_found` naming it."""
        found = self.get_many(wanted)
        for index, value in enumerate(wanted):
            if value not in found:
                raise block_not_found(value, f"/blockIds/{index}")
        return [subtree_of(rows) for rows in self.named_subtrees(wanted)]

    def tree(self) -> list[Block]:
        """The whole body as a block tree."""
        if self._all is not None:
            return tree_of(self._all)
        return read_tree(self.conn, self.workspace_id, self.page_id)


def read_tree(conn: Connection, workspace_id: str, page_id: str) -> list[Block]:
    """A page's body in one ordered query: the whole-page read path."""
    return assemble(
        conn.execute(
            "SELECT id, parent_id, type, text, props FROM blocks WHERE workspace_id = ? AND page_id = ?"
            " ORDER BY parent_id, position",
            (workspace_id, page_id),
        )
    )


def in_document_order(rows: list[BlockRow], root_id: str) -> list[BlockRow]:
    """The rows of one subtree (root first), each parent before its children, siblings in order."""
    kids: dict[str, list[BlockRow]] = {}
    by_id = {}
    for row in sorted(rows, key=lambda r: r.position):
        kids.setdefault(row.parent_id, []).append(row)
        by_id[row.id] = row
    out: list[BlockRow] = []

    def visit(row: BlockRow) -> None:
        out.append(row)
        for child in kids.get(row.id, []):
            visit(child)

    if root_id in by_id:
        visit(by_id[root_id])
    return out


def _preorder(root: BlockRow, kids: dict[str, list[BlockRow]]) -> list[BlockRow]:
    """`root` and every row under it, each parent before its children, siblings in order."""
    out: list[BlockRow] = []
    stack = [root]
    while stack:
        row = stack.pop()
        out.append(row)
        stack += reversed(kids.get(row.id, []))
    return out


def walk_rows(blocks: PageBlocks, parent_id: str = TOP, batch: int = 16) -> Iterator[BlockRow]:
    """The page's rows in document order, read lazily in small batches (for a summary of the opening)."""
    after: str | None = None
    while True:
        rows = blocks.children(parent_id, after=after, limit=batch)
        for row in rows:
            yield row
            yield from walk_rows(blocks, row.id, batch)
        if len(rows) < batch:
            return
        after = rows[-1].position


def apply(conn: Connection, workspace_id: str, page_id: str, changes: list[BlockChange]) -> None:
    """Write a change set's rows. Deletes first, then updates, then inserts; when several rows change
    place at once, they first step aside (a key no real one can have), so no two siblings ever share
    an order key, not even between two statements."""
    page = (workspace_id, page_id)
    deletes = [(*page, c.id) for c in changes if c.after is None]
    updates = [c for c in changes if c.before is not None and c.after is not None]
    inserts = [c.after for c in changes if c.before is None and c.after is not None]
    if deletes:
        conn.executemany("DELETE FROM blocks WHERE workspace_id = ? AND page_id = ? AND id = ?", deletes)
    moving = [
        c
        for c in updates
        if c.before is not None and c.after is not None and not c.before.same_place(c.after)
    ]
    if len(moving) > 1:
        conn.executemany(
            "UPDATE blocks SET position = ? WHERE workspace_id = ? AND page_id = ? AND id = ?",
            [("~" + c.id, *page, c.id) for c in moving],
        )
    if updates:
        conn.executemany(
            "UPDATE blocks SET parent_id = ?, position = ?, type = ?, text = ?, props = ?, revision = ?"
            " WHERE workspace_id = ? AND page_id = ? AND id = ?",
            [(*_values(c.after), *page, c.id) for c in updates if c.after is not None],
        )
    if inserts:
        conn.executemany(
            "INSERT INTO blocks (parent_id, position, type, text, props, revision, workspace_id, page_id, id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*_values(row), *page, row.id) for row in inserts if row is not None],
        )


def new_rows(blocks: list[Block], parent: str, keys: list[str], revision: int) -> list[BlockChange]:
    """Insert changes for new blocks (with their children) under `parent`, in document order."""
    out: list[BlockChange] = []
    for block, key in zip(blocks, keys, strict=True):
        row = BlockRow(
            block["id"], parent, key, block["type"], block["text"], block.get("props", {}), revision
        )
        out.append(BlockChange(row.id, None, row))
        children = block.get("children") or []
        if children:
            out += new_rows(children, row.id, keys_between(None, None, len(children)), revision)
    return out


def replace_rows(
    old: dict[str, BlockRow], body: list[Block], diff: Sequence[BlockOp], revision: int
) -> list[BlockChange]:
    """The row changes that turn `old` into `body` (`diff`: `replace_diff` of the two). Blocks the diff
    keeps in place keep their order keys (increasing, as the diff's in-order core); the others get
    keys between them."""
    placed_ids = {op["blockId"] for op in diff if op["op"] in ("insert", "move")}
    changes: list[BlockChange] = []
    lists: list[tuple[str, list[Block]]] = [(TOP, body)]
    seen: set[str] = set()
    while lists:
        parent, siblings = lists.pop()
        keys = _sibling_keys(parent, siblings, old, placed_ids)
        respaced = too_long(keys)
        if respaced:
            keys = keys_between(None, None, len(siblings))
        for block, key in zip(siblings, keys, strict=True):
            seen.add(block["id"])
            before = old.get(block["id"])
            after = BlockRow(
                block["id"], parent, key, block["type"], block["text"], block.get("props", {}), revision
            )
            children = block.get("children")
            if children:
                lists.append((block["id"], children))
            if before is None:
                changes.append(BlockChange(after.id, None, after))
                continue
            moved, content = block["id"] in placed_ids, not before.same_content(after)
            if not (moved or content):
                if before.same_place(after):
                    continue
                after = replace(after, revision=before.revision)
            changes.append(BlockChange(after.id, before, after, rekey=respaced and not moved))
    changes += [BlockChange(row.id, row, None) for row_id, row in old.items() if row_id not in seen]
    return changes


def _sibling_keys(
    parent: str, siblings: list[Block], old: dict[str, BlockRow], placed_ids: set[str]
) -> list[str]:
    keys: list[str | None] = [
        None if block["id"] in placed_ids or block["id"] not in old else old[block["id"]].position
        for block in siblings
    ]
    out: list[str] = []
    index = 0
    while index < len(keys):
        kept = keys[index]
        if kept is not None:
            out.append(kept)
            index += 1
            continue
        end = index
        while end < len(keys) and keys[end] is None:
            end += 1
        low = out[-1] if out else None
        out += keys_between(low, keys[end] if end < len(keys) else None, end - index)
        index = end
    return out


def _values(row: BlockRow | None) -> tuple[Any, ...]:
    assert row is not None
    return (
        row.parent_id,
        row.position,
        row.type,
        row.text,
        dumps(row.props) if row.props else None,
        row.revision,
    )
