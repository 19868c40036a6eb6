"""The PostgreSQL dialect of the store (`--db postgresql://…`): one database, any number of replicas.

`opening.open_store` and `opening.open_kernel` open it; `dialect.PostgresDialect` is what the portable
kernel (`kernel/store`) runs on. Nothing here is imported unless a URL is given (psycopg is optional),
but `bounds.py`, which the configuration reads without psycopg.
"""
