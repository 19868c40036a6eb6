"""mnote_mcp: the Model Context Protocol door into mnote pages.

The package is layered top to bottom (transport, server, mapping, dispatch, tools, kernel); each layer
only calls the one below it. See docs/architecture.md.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
