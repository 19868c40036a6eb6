"""The SQLite dialect of the store (`--db PATH`): one file, safe for many processes.

`opening.open_store` and `opening.open_kernel` open it; `dialect.SqliteDialect` is what the portable
kernel (`kernel/store`) runs on.
"""
