"""Issue 22's side-by-side agent-task benchmark: mnote against `@modelcontextprotocol/server-filesystem`
on the same notes (as Markdown files), with scripted agents, counted as Hermes 0.19.0 presents it.

`python -m bench.agenttasks` (docs/performance.md, "Agent tasks"): `corpus.py` makes the notes,
`session.py` drives both servers through Hermes's own MCP client and counts what its model reads,
`tasks.py` holds the tasks (one best-case scripted agent per server each, end states checked).
"""
