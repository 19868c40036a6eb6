"""`mnote://workspaces/{workspaceId}/pages/{documentId}`: one URI per page, ids percent-encoded."""

from __future__ import annotations

from mcp.shared.uri_template import UriTemplate

from mnote_mcp.kernel.port import PageKey

PAGE_URI_TEMPLATE = "mnote://workspaces/{workspaceId}/pages/{documentId}"
# No page URI is longer: two ids of at most a few hundred characters, percent-encoded. A longer one
# names no page, and is not matched at all (a client's 100,000-character URI costs nothing).
MAX_URI_CHARS = 2_048
_TEMPLATE = UriTemplate.parse(PAGE_URI_TEMPLATE)


def page_uri(key: PageKey) -> str:
    return _TEMPLATE.expand({"workspaceId": key.workspace_id, "documentId": key.document_id})


def page_key(uri: str) -> PageKey | None:
    """The page a URI names, or None when it is not a page URI of this server."""
    if len(uri) > MAX_URI_CHARS:
        return None
    match = _TEMPLATE.match(uri)
    if match is None:
        return None
    workspace_id, document_id = match.get("workspaceId"), match.get("documentId")
    if not isinstance(workspace_id, str) or not isinstance(document_id, str):
        return None
    if not workspace_id or not document_id:
        return None
    return PageKey(workspace_id, document_id)
