"""Pages as MCP resources: listing, reading as Markdown, and change notifications in both protocol eras."""

from mnote_mcp.resources.pages import PageResources
from mnote_mcp.resources.uris import PAGE_URI_TEMPLATE, page_key, page_uri
from mnote_mcp.resources.watch import PageWatcher, Watch

__all__ = ["PAGE_URI_TEMPLATE", "PageResources", "PageWatcher", "Watch", "page_key", "page_uri"]
