"""Pages as MCP resources: listing, reading as Markdown, and change notifications in both protocol eras
(`pages.py`), their URIs (`uris.py`) and the watcher behind the notifications (`watch.py`).

Nothing is imported here: a module that needs only the watcher's limits (the settings) loads no MCP SDK.
"""
