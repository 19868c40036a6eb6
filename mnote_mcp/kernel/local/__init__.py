"""The embedded kernel: mnote's kernel semantics on one SQLite file, safe for many processes."""

from mnote_mcp.kernel.store.kernel import LocalKernel
from mnote_mcp.kernel.store.store import LocalStore

__all__ = ["LocalKernel", "LocalStore"]
