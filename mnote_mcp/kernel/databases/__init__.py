"""`--db` to a kernel: a SQLite path or a `postgresql://` URL opened as a store; a consistent copy of a
SQLite store."""
