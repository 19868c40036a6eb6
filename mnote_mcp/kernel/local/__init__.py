"""The embedded kernel: mnote's kernel semantics on one SQLite file, safe for many processes."""

from mnote_mcp.kernel.local.kernel import LocalKernel
from mnote_mcp.kernel.local.store import LocalStore

__all__ = ["LocalKernel", "LocalStore"]
