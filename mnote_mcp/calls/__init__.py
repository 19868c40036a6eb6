"""One tool call, start to finish: admitted, mapped to the contract's request, run under its limits,
and always answered with an envelope (docs/architecture.md, "calls")."""
