"""The tool declarations: one `ToolSpec` per tool, carrying its whole contract.

`catalog.ALL_TOOLS` lists them; `registry` advertises and finds them; `selection` decides which exist for
one server. This package file imports nothing, so the command line can name toolsets without loading
the MCP SDK.
"""
