"""The contract's words, shared by every layer above the kernel: the envelopes, the messages a caller
reads, the scopes a connection is granted, and who is calling. Nothing here knows MCP or a transport."""
