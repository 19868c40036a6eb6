"""The embedded kernel: mnote's kernel semantics on one SQLite file, safe for many processes."""

from mnote_mcp.kernel.local.store import LocalStore
from mnote_mcp.kernel.store.kernel import LocalKernel

__all__ = ["LocalKernel", "LocalStore"]
