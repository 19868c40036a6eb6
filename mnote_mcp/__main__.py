"""`python -m mnote_mcp` is the same program as the `mnote-mcp` console script."""

from mnote_mcp.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
