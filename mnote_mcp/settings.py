"""The settings machinery, and the settings of the commands that serve the kernel alone.

`mnote_mcp.config` says how a setting is declared (one declaration: flag, variable, parser, default,
help); the machinery is here, with the settings every command shares (logging, the store) and those
of `runtime serve` and `runtime cli`. This module imports only the base and the kernel: `runtime cli`
starts once per call of a `--kernel cli:` relay, and its command line is parsed from these
declarations without loading the MCP server's (`mnote_mcp.config`: the call path, the tools, the MCP
surface, each of whose limits a setting of `serve` declares).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Literal, TypeVar, cast
from urllib.parse import urlsplit

from mnote_mcp.base.logs import LogFormat, LogLevel
from mnote_mcp.base.net import is_loopback
from mnote_mcp.kernel.limits import (
    DEFAULT_MAX_BLOCK_CHARS,
    DEFAULT_MAX_PAGE_BLOCKS,
    DEFAULT_MAX_PAGE_BYTES,
    PageLimits,
)
from mnote_mcp.kernel.postgres.bounds import DEFAULT_SEARCH_TIMEOUT, SearchBounds, StoreOptions
from mnote_mcp.kernel.store.dialect import DEFAULT_CONNECT_TIMEOUT

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from mnote_mcp.base.httpguard import ClientLimits

HttpParser = Literal["httptools", "h11"]
ENV_PREFIX = "MNOTE_"
RUNTIME_HTTP = "what one HTTP client may hold (runtime serve)"
LOGGING = "logging (stderr)"
STORE = "the embedded kernel's store (--kernel local, runtime serve|cli)"
_SETTING = "mnote_mcp.setting"
T = TypeVar("T")
W = TypeVar("W", bound=str)
C = TypeVar("C", bound="DataclassInstance")
logger = logging.getLogger(__name__)


def default_store_path() -> Path:
    """The per-user data path (XDG on Linux, the platform's own elsewhere)."""
    from platformdirs import user_data_path

    return user_data_path("mnote-mcp", appauthor=False) / "mnote.db"


def default_runtime_token_path() -> Path:
    """Where `runtime serve` keeps the service token it generates when given none, and where a relay
    to a runtime on this machine looks for it: beside the default store, private to its user."""
    return default_store_path().with_name("runtime-token")


def service_token(from_environment: str | None, file: Path | None) -> str | None:
    """The runtime's service token: from its file (mode 0600) if one is named, else the environment;
    never from the command line (a relay's `--runtime-token-file`, `runtime check`'s too)."""
    if file is not None:
        if from_environment:
            raise ValueError("MNOTE_RUNTIME_TOKEN and a token file are both set: keep one")
        return _read_secret(file)
    return from_environment.strip() if from_environment and from_environment.strip() else None


def local_service_token(url: str) -> str | None:
    """For a runtime on this machine (a loopback URL) given no token: the one `runtime serve`
    generated into its default file, if that file exists (never sent to another host)."""
    try:
        host = urlsplit(url).hostname
    except ValueError:  # not a URL: the adapter says so, naming the URL
        return None
    path = default_runtime_token_path()
    if host is None or not is_loopback(host) or not path.exists():
        return None
    logger.info("the runtime's service token from %s", path)
    return _read_secret(path)


def _read_secret(path: Path) -> str:
    """`base.secretfiles.read_secret`, imported when a token is read (it loads `secrets` and
    `tempfile`, which `runtime cli`, started once per call, never needs)."""
    from mnote_mcp.base.secretfiles import read_secret

    return read_secret(path)


def text(value: str) -> str:
    return value


def optional_text(value: str) -> str | None:
    """Empty means "none": `--actor ''` binds no actor."""
    return value or None


def _expand(value: str) -> Path:
    try:
        return Path(value).expanduser()
    except RuntimeError:  # `~name` of a user that does not exist
        raise ValueError(f"{value!r}: cannot expand '~' (no such user or home directory)") from None


def optional_path(value: str) -> Path | None:
    return _expand(value) if value.strip() else None


def path(value: str) -> Path:
    if not value.strip():
        raise ValueError("a path is required")
    return _expand(value)


def csv(value: str) -> tuple[str, ...]:
    """A comma-separated value as its non-empty items."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def port_number(value: str) -> int:
    """A TCP port, 0 to 65535 (0: the system picks a free one; the log says which)."""
    number = integer(value)
    if not 0 <= number <= 65535:
        raise ValueError(f"{number} is not a TCP port (0 to 65535)")
    return number


def positive_number(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a number") from None
    if not number > 0 or number == float("inf"):
        raise ValueError(f"must be a positive number, not {value}")
    return number


def positive_int(value: str) -> int:
    number = integer(value)
    if number < 1:
        raise ValueError(f"must be a positive whole number, not {value}")
    return number


def block_chars(value: str) -> int:
    number = positive_int(value)
    if number > DEFAULT_MAX_BLOCK_CHARS:
        raise ValueError(f"must be at most {DEFAULT_MAX_BLOCK_CHARS}, not {value}")
    return number


def non_negative_int(value: str) -> int:
    number = integer(value)
    if number < 0:
        raise ValueError(f"must not be negative, not {value}")
    return number


def integer(value: str) -> int:
    try:
        return int(value.strip().replace("_", ""))
    except ValueError:
        raise ValueError(f"{value!r} is not a whole number") from None


class no_secret_on_argv:  # noqa: N801  (used like the parser functions beside it)
    """A flag that once took a secret: refused, naming where the secret goes instead."""

    def __init__(self, instead: str) -> None:
        self.instead = instead

    def __call__(self, value: str) -> str:
        raise ValueError(f"a secret on the command line shows in every process listing; use {self.instead}")


class choice(Generic[W]):  # noqa: N801  (used like the parser functions beside it)
    """One of a few words; `--help` shows them as `{a,b}`. Its words are typed: `choice[LogFormat]("text", "json")`
    parses to `Literal["text", "json"]`, so a field of another type fails mypy."""

    def __init__(self, *values: W) -> None:
        self.values = values

    def __call__(self, value: str) -> W:
        for word in self.values:
            if word == value:
                return word
        raise ValueError(f"{value!r} is not one of {', '.join(self.values)}")


_TRUE = frozenset({"1", "true", "yes", "on", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "n", ""})


def boolean(value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"{value!r} is not a boolean; use 1/true/yes/on or 0/false/no/off")


# -- the declaration -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Setting(Generic[T]):
    """What a field declares besides its default (see the module docstring)."""

    parse: Callable[[str], T]
    help: str
    flag: str | None = None  # None: "--" + the field name with dashes; "": no flag
    env: str | None = None  # None: "MNOTE_" + the field name upper-cased; "": no variable
    switch: bool = False
    metavar: str | None = None
    group: str | None = None
    required: bool = False
    positional: bool = False
    # How the default reads in --help, when str(default) would not do; a function where the words come
    # from what is loaded only to show them (the tool declarations, which bring the MCP SDK).
    shown: str | Callable[[], str] | None = None


# Each function below returns a `dataclasses.field`, typed as the value the field holds: the default
# and what the parser returns must both be the field's type, or mypy --strict fails on the field.


def setting(
    default: T,
    parse: Callable[[str], T],
    help: str,
    *,
    flag: str | None = None,
    env: str | None = None,
    metavar: str | None = None,
    group: str | None = None,
    positional: bool = False,
    shown: str | Callable[[], str] | None = None,
) -> T:
    """A setting with a value (`--port 8765`)."""
    declared = Setting(parse, help, flag, env, False, metavar, group, False, positional, shown)
    return field(default=default, metadata={_SETTING: declared})


def required(
    parse: Callable[[str], T],
    help: str,
    *,
    env: str | None = None,
    metavar: str | None = None,
    positional: bool = False,
) -> T:
    """A setting with no default: a command run without it is a usage error (`SettingError`)."""
    declared = Setting(parse, help, None, env, False, metavar, None, True, positional)
    return cast(T, field(default=None, metadata={_SETTING: declared}))


def switch(
    help: str,
    *,
    default: bool = False,
    flag: str | None = None,
    env: str | None = None,
    group: str | None = None,
) -> bool:
    """A flag without a value (`--read-only`); present, it sets the opposite of `default`."""
    declared = Setting(boolean, help, flag, env, True, None, group)
    return field(default=default, metadata={_SETTING: declared})


def secret(help: str, *, flag: str = "", env: str | None = None, group: str | None = None) -> str | None:
    """A credential: kept out of `repr`, and by default out of the flags (a flag shows in `ps`)."""
    declared = Setting(optional_text, help, flag, env, group=group)
    return cast(str | None, field(default=None, repr=False, metadata={_SETTING: declared}))


@dataclass(frozen=True, slots=True)
class Option:
    """A declared setting of one command, with its names resolved."""

    name: str
    default: object
    setting: Setting[object]
    flag: str | None
    env: str | None

    def value_from(self, raw: str) -> object:
        """The value a flag's or a variable's text gives; raises ValueError with the reason."""
        if self.setting.switch:
            return (not self.default) if boolean(raw) else self.default
        return self.setting.parse(raw)

    @property
    def shown_default(self) -> str:
        if callable(self.setting.shown):
            return self.setting.shown()
        if self.setting.shown is not None:
            return self.setting.shown
        value = self.default
        if value is None or value == () or value == frozenset():
            return "none"
        if isinstance(value, (tuple, frozenset)):
            return ",".join(sorted(str(item) for item in value))
        return str(value)


def options(config_type: type[DataclassInstance]) -> Iterator[Option]:
    """The declared settings of a command's dataclass, in declaration order."""
    for item in dataclasses.fields(config_type):
        declared: Setting[object] | None = item.metadata.get(_SETTING)
        if declared is None:
            continue
        flag = declared.flag if declared.flag is not None else "--" + item.name.replace("_", "-")
        env = declared.env if declared.env is not None else ENV_PREFIX + item.name.upper()
        yield Option(item.name, item.default, declared, flag or None, env or None)


def from_sources(config_type: type[C], given: Mapping[str, str], environ: Mapping[str, str]) -> C:
    """A command's configuration: each setting from its flag's text, else its variable, else its default.

    Raises `SettingError` naming the flag or the variable whose value does not parse.
    """
    values: dict[str, object] = {}
    for option in options(config_type):
        if option.name in given:
            source, raw = option.flag or option.name, given[option.name]
        elif option.env is not None and option.env in environ:
            source, raw = option.env, environ[option.env]
        elif option.setting.required:
            names = " or ".join(filter(None, (option.flag or option.name, option.env)))
            raise SettingError(f"{names} is required")
        else:
            continue
        try:
            values[option.name] = option.value_from(raw)
        except ValueError as exc:
            shown = f"{source}={raw!r}" if source == option.env else source
            raise SettingError(shown, str(exc)) from None
    return config_type(**values)


class SettingError(ValueError):
    """A flag or variable whose value cannot be used; the message names it and says why."""

    def __init__(self, source: str, reason: str | None = None) -> None:
        super().__init__(f"{source}: {reason}" if reason is not None else source)
        self.reason = reason


# -- the commands' configurations ------------------------------------------------------------------


@dataclass(frozen=True)
class LogSettings:
    log_level: LogLevel = setting(
        "info",
        choice[LogLevel]("debug", "info", "warning", "error"),
        "how much to log on stderr",
        group=LOGGING,
    )
    log_format: LogFormat = setting(
        "text", choice[LogFormat]("text", "json"), "one line of text or JSON per record", group=LOGGING
    )


@dataclass(frozen=True)
class StoreSettings:
    """What the embedded kernel enforces and how long it waits, wherever it runs."""

    max_page_blocks: int = setting(
        DEFAULT_MAX_PAGE_BLOCKS,
        positive_int,
        "most blocks one page may hold (every write checks)",
        group=STORE,
    )
    max_page_bytes: int = setting(
        DEFAULT_MAX_PAGE_BYTES,
        positive_int,
        "most bytes of block content (ids, types, text, props) one page may hold",
        group=STORE,
    )
    max_block_chars: int = setting(
        DEFAULT_MAX_BLOCK_CHARS,
        block_chars,
        f"most characters of text one block may hold, whichever command makes it (every write checks"
        f" before it builds the text; at most {DEFAULT_MAX_BLOCK_CHARS})",
        group=STORE,
    )
    store_busy_timeout: float = setting(
        30.0,
        positive_number,
        "seconds a call waits for another writer's lock before the store is reported unavailable",
        group=STORE,
    )
    db_pool_size: int = setting(
        8,
        positive_int,
        "most PostgreSQL connections (and calls at once) this process holds (--db postgresql://…)",
        group=STORE,
    )
    db_search_timeout: float = setting(
        DEFAULT_SEARCH_TIMEOUT,
        positive_number,
        "seconds a search statement may run before it is stopped (search_timeout, retryable;"
        " --db postgresql://…)",
        group=STORE,
    )

    db_connect_timeout: float = setting(
        DEFAULT_CONNECT_TIMEOUT,
        positive_number,
        "seconds the database may take to accept a connection before it counts as down: calls then"
        " answer store_unreachable (retryable) within about this (--db postgresql://…)",
        group=STORE,
    )

    @property
    def page_limits(self) -> PageLimits:
        return PageLimits(self.max_page_blocks, self.max_page_bytes, self.max_block_chars)

    @property
    def search_bounds(self) -> SearchBounds:
        return SearchBounds(self.db_search_timeout)

    def store_options(self, *, read_only: bool = False) -> StoreOptions:
        """How every command that opens the embedded store opens it: these settings, once."""
        return StoreOptions(
            read_only=read_only,
            limits=self.page_limits,
            busy_timeout=self.store_busy_timeout,
            pool_size=self.db_pool_size,
            search=self.search_bounds,
            connect_timeout=self.db_connect_timeout,
        )


def store_location(value: str) -> Path | str | None:
    """`--db`: a SQLite file's path, or a PostgreSQL URL (`postgresql://…`, kept as text)."""
    if value.strip().startswith(("postgresql://", "postgres://")):
        return value.strip()
    return optional_path(value)


def db_setting() -> Path | str | None:
    return setting(
        None,
        store_location,
        "the store: a SQLite file, or a PostgreSQL URL (postgresql://USER:PASSWORD@HOST/DB)",
        metavar="PATH|URL",
        shown="per-user data path",
    )


# What one HTTP client may hold (mnote_mcp/base/httpguard.py): the MCP transport's and the runtime's
# servers take the same settings, each under its own group and variables (MNOTE_RUNTIME_* for the runtime).
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
# A runtime command can carry a whole page (--max-page-bytes of content, 8 MiB by default) and JSON
# escaping can double text full of quotes or backslashes: four times the page limit's default.
DEFAULT_RUNTIME_MAX_BODY_BYTES = 4 * DEFAULT_MAX_PAGE_BYTES


@dataclass(frozen=True, slots=True)
class HttpLimit(Generic[T]):
    """One of the settings both HTTP servers take: its default, its parser and its words, typed alike."""

    default: T
    parse: Callable[[str], T]
    words: str


HTTP_PARSER: HttpLimit[HttpParser] = HttpLimit(
    "httptools",
    choice[HttpParser]("httptools", "h11"),
    "uvicorn's HTTP/1.1 parser: httptools (C, llhttp) or h11 (pure Python, slower); both under the"
    " same connection cap, header deadline and 16 KiB header bound",
)
MAX_BODY_BYTES = HttpLimit(
    DEFAULT_MAX_BODY_BYTES,
    positive_int,
    "largest request body; a larger one is answered 413 (before it is read when announced)",
)
MAX_CONNECTIONS = HttpLimit(
    500,
    positive_int,
    "open connections at most; the longest-waiting half-sent request makes room (408), else one more"
    " is answered 503 and closed as it is accepted",
)
HEADER_TIMEOUT = HttpLimit(
    10.0,
    positive_number,
    "seconds a client has to send a request's line and headers (408 and closed after it)",
)
BODY_TIMEOUT = HttpLimit(
    30.0,
    positive_number,
    "seconds an authenticated client has to send a request's body (408 and closed after it)",
)


SHUTDOWN_GRACE = HttpLimit(30.0, positive_number, "seconds calls in flight get to answer on shutdown")
# `runtime serve`'s calls are kernel calls a relay waits for within its --runtime-timeout (10 s by
# default): a shorter grace lets them answer shutting_down (retried) before the relay gives up on them.
DEFAULT_RUNTIME_SHUTDOWN_GRACE = 5.0


def http_limit(limit: HttpLimit[T], group: str, *, env: str | None = None, default: T | None = None) -> T:
    """One of the limits above, in `group`, with its own variable if `env`."""
    return setting(
        limit.default if default is None else default, limit.parse, limit.words, group=group, env=env
    )


def demo_switch() -> bool:
    return switch(
        "load the demo workspace into a new store named by --db (the default store gets it anyway;"
        " a PostgreSQL store never does)",
        flag="--demo",
        env="MNOTE_DEMO",
    )


def no_demo_switch() -> bool:
    return switch("keep a new store empty, the default one too (no demo workspace)", flag="--no-demo")


def wants_demo(db: Path | str | None, *, demo: bool, no_demo: bool) -> bool:
    """Whether a *new* store gets the demo workspace: the default store (no `--db`), the one-command
    start, does; a store an operator names does only when asked (`--demo`), and a PostgreSQL database
    never (seed it on purpose: `mnote-mcp seed --db URL FILE`). The demo's members are real grants
    (`user_1` is an editor of `ws_1`), which no deployment should get by accident."""
    if demo and no_demo:
        raise SettingError("--demo and --no-demo (MNOTE_DEMO, MNOTE_NO_DEMO): give one")
    if isinstance(db, str):  # a PostgreSQL URL (`store_location` keeps only those as text)
        if demo:
            raise SettingError(
                "--demo: the demo workspace is never loaded into PostgreSQL; seed it on purpose with"
                " mnote-mcp seed --db URL examples/workspace.json"
            )
        return False
    return not no_demo and (demo or db is None)


def store_or_default(db: Path | str | None) -> Path | str:
    return db if db is not None else default_store_path()


@dataclass(frozen=True)
class RuntimeConfig(StoreSettings, LogSettings):
    """`mnote-mcp runtime serve`: the embedded kernel over the runtime protocol v1 (HTTP)."""

    db: Path | str | None = db_setting()
    host: str = setting("127.0.0.1", text, "address to listen on", env="MNOTE_RUNTIME_HOST")
    port: int = setting(8766, port_number, "TCP port to listen on", env="MNOTE_RUNTIME_PORT")
    token: str | None = secret("service token to require", env="MNOTE_RUNTIME_TOKEN")
    token_file: Path | None = setting(
        None,
        optional_path,
        "read the service token to require from this file (mode 0600) instead of MNOTE_RUNTIME_TOKEN;"
        " with neither, one is generated into runtime-token beside the default store, where a relay on"
        " this machine finds it",
        metavar="FILE",
        env="MNOTE_RUNTIME_TOKEN_FILE",
    )
    unsafe_no_auth: bool = switch(
        "serve without a service token (loopback only; every local process may then read and write as"
        " any actor: for tests and development)",
        env="MNOTE_RUNTIME_UNSAFE_NO_AUTH",
    )
    token_on_argv: str | None = setting(
        None,
        no_secret_on_argv("MNOTE_RUNTIME_TOKEN or --token-file"),
        "removed: a token on the command line shows in every process listing",
        flag="--token",
        env="",
        metavar="T",
    )
    seed: Path | None = setting(None, optional_path, "load this fixture before serving", metavar="FILE")
    demo: bool = demo_switch()
    no_demo: bool = no_demo_switch()

    @property
    def seeds_demo(self) -> bool:
        return wants_demo(self.db, demo=self.demo, no_demo=self.no_demo)

    record: Path | None = setting(
        None, optional_path, "append each request's headers here (JSON lines; tests)", metavar="FILE", env=""
    )
    # what one HTTP client may hold, as on `serve --transport http` (mnote_mcp/base/httpguard.py)
    http_parser: HttpParser = http_limit(HTTP_PARSER, RUNTIME_HTTP, env="MNOTE_RUNTIME_HTTP_PARSER")
    max_body_bytes: int = http_limit(
        MAX_BODY_BYTES,
        RUNTIME_HTTP,
        env="MNOTE_RUNTIME_MAX_BODY_BYTES",
        default=DEFAULT_RUNTIME_MAX_BODY_BYTES,
    )
    max_connections: int = http_limit(MAX_CONNECTIONS, RUNTIME_HTTP, env="MNOTE_RUNTIME_MAX_CONNECTIONS")
    header_timeout: float = http_limit(HEADER_TIMEOUT, RUNTIME_HTTP, env="MNOTE_RUNTIME_HEADER_TIMEOUT")
    body_timeout: float = http_limit(BODY_TIMEOUT, RUNTIME_HTTP, env="MNOTE_RUNTIME_BODY_TIMEOUT")
    shutdown_grace: float = http_limit(
        SHUTDOWN_GRACE,
        RUNTIME_HTTP,
        env="MNOTE_RUNTIME_SHUTDOWN_GRACE",
        default=DEFAULT_RUNTIME_SHUTDOWN_GRACE,
    )
    max_audit_records: int = setting(
        10_000,
        positive_int,
        "most audit records one GET /v1/audit may ask for (its limit); more is 400 invalid_argument",
        group=RUNTIME_HTTP,
        env="MNOTE_RUNTIME_MAX_AUDIT_RECORDS",
    )

    @property
    def client_limits(self) -> ClientLimits:
        from mnote_mcp.base.httpguard import ClientLimits  # uvicorn and Starlette: only when serving

        return ClientLimits(
            max_connections=self.max_connections,
            header_timeout=self.header_timeout,
            max_body_bytes=self.max_body_bytes,
            body_timeout=self.body_timeout,
            http_parser=self.http_parser,
        )


@dataclass(frozen=True)
class RuntimeCliConfig(StoreSettings, LogSettings):
    """`mnote-mcp runtime cli`: answer one mnote-cli JSON request from stdin on stdout."""

    log_level: LogLevel = setting(
        "warning",
        choice[LogLevel]("debug", "info", "warning", "error"),
        "how much to log on stderr",
        group=LOGGING,
    )
    db: Path | str | None = db_setting()
    demo: bool = demo_switch()
    no_demo: bool = no_demo_switch()

    @property
    def seeds_demo(self) -> bool:
        return wants_demo(self.db, demo=self.demo, no_demo=self.no_demo)

    max_body_bytes: int = setting(
        DEFAULT_RUNTIME_MAX_BODY_BYTES,
        positive_int,
        "largest request read from stdin; a longer one is answered invalid_argument before the store is"
        " opened (the variable is runtime serve's too)",
        env="MNOTE_RUNTIME_MAX_BODY_BYTES",
    )
