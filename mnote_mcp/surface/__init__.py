"""What MCP sees besides the tool listing: how an envelope is carried, asking the person, every answer
within the budget, and the prompts and resources (docs/architecture.md, "server")."""
