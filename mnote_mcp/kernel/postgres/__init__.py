"""The kernel on PostgreSQL: the embedded kernel's commands over a psycopg 3 pool (`--db postgresql://…`)."""
