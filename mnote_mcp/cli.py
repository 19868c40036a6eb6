"""The `mnote-mcp` command: serve (the default), seed, audit, token, demo, runtime.

Every flag, its `MNOTE_*` variable, parser, default and help come from the declarations in
`mnote_mcp.config`; this module only builds the parser from them and runs the command. A value that
does not parse, from a flag or from a variable, is a usage error (exit 2) that names it.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnote_mcp import __version__
from mnote_mcp.base.logs import configure_logging
from mnote_mcp.kernel.errors import StoreUnavailableError
from mnote_mcp.settings import (
    LogSettings,
    Option,
    RuntimeCliConfig,
    RuntimeConfig,
    SettingError,
    choice,
    default_runtime_token_path,
    from_sources,
    local_service_token,
    options,
    service_token,
    store_or_default,
)

if TYPE_CHECKING:  # (the store is opened lazily: `--help` loads no kernel)
    from mnote_mcp.config import (
        AuditConfig,
        BackupConfig,
        DemoConfig,
        MigrateConfig,
        RuntimeCheckConfig,
        SeedConfig,
        TokenConfig,
        TokenListConfig,
        TokenRevokeConfig,
    )
    from mnote_mcp.kernel.store.store import Store

logger = logging.getLogger("mnote_mcp")
# Exit statuses (README, "Exit status"): 0 done, 1 `audit` found nothing or a `runtime check` check
# failed, 2 a usage or configuration error, 3 the store cannot be opened, 130 interrupted.
CHECK_FAILED = 1
USAGE_ERROR = 2
STORE_UNAVAILABLE = 3

Settings = Callable[[], type[LogSettings]]


def _config(name: str) -> Settings:
    """A command's settings declared in `mnote_mcp.config`, imported only when that command is parsed:
    the MCP server's settings import the call path, the tools and the MCP surface for their defaults,
    which `runtime cli`, started once per call of a `cli:` relay, must not pay for."""

    def load() -> type[LogSettings]:
        from mnote_mcp import config

        declared: type[LogSettings] = getattr(config, name)
        return declared

    return load


# command -> (its settings, one line of help); `runtime` has commands of its own.
COMMANDS: dict[str, tuple[Settings, str]] = {
    "serve": (_config("ServerConfig"), "serve the mnote.* tools (the default command)"),
    "seed": (_config("SeedConfig"), "load a workspace fixture into a store"),
    "audit": (_config("AuditConfig"), "read the audit trail of a store (JSON lines)"),
    "migrate": (_config("MigrateConfig"), "bring a store's schema to this release's version (JSON)"),
    "backup": (_config("BackupConfig"), "copy a SQLite store, consistent while it is served (JSON)"),
    "token": (_config("TokenConfig"), "mint a bearer token into a tokens file (printed once)"),
    "demo": (_config("DemoConfig"), "a scripted tour of every tool over a real stdio MCP session"),
}
RUNTIME_COMMANDS: dict[str, tuple[Settings, str]] = {
    "serve": (lambda: RuntimeConfig, "serve the embedded kernel over the runtime protocol v1 (HTTP)"),
    "cli": (lambda: RuntimeCliConfig, "answer one mnote-cli JSON request from stdin on stdout"),
    "check": (
        _config("RuntimeCheckConfig"),
        "the conformance kit: check a runtime against protocol v1 and the kernel",
    ),
}
# `token` alone mints a token (its flags); `token list` and `token revoke ID` manage the file.
TOKEN_COMMANDS: dict[str, tuple[Settings, str]] = {
    "list": (
        _config("TokenListConfig"),
        "the tokens of a tokens file: id, actor, scopes, created (JSON lines)",
    ),
    "revoke": (_config("TokenRevokeConfig"), "remove a token from a tokens file by its id (refused live)"),
}
SUBCOMMANDS = (*COMMANDS, "runtime")
# Every command as typed, in the order the overview lists them.
COMMAND_WORDS: tuple[str, ...] = (
    *(
        word
        for name in COMMANDS
        for word in (name, *(f"token {t}" for t in TOKEN_COMMANDS if name == "token"))
    ),
    *(f"runtime {name}" for name in RUNTIME_COMMANDS),
)


def overview() -> str:
    """What `mnote-mcp --help` prints: the commands first, one line each, then where the flags are
    (serve alone has about a hundred: `mnote-mcp serve --help`)."""
    summaries = {
        **{name: summary for name, (_, summary) in COMMANDS.items()},
        **{f"token {name}": summary for name, (_, summary) in TOKEN_COMMANDS.items()},
        **{f"runtime {name}": summary for name, (_, summary) in RUNTIME_COMMANDS.items()},
    }
    width = max(len(word) for word in COMMAND_WORDS) + 2
    lines = [
        "usage: mnote-mcp [COMMAND] [FLAGS...]",
        "",
        "MCP server for mnote pages (the mnote.* tools). With no command it serves MCP over stdio on the",
        "default store, which a new install seeds with a demo workspace.",
        "",
        "commands:",
        *(f"  {word:{width}}{summaries[word]}" for word in COMMAND_WORDS),
        "",
        "mnote-mcp help COMMAND (or mnote-mcp COMMAND --help) lists a command's flags, each with its",
        "default and MNOTE_* variable; serve's are the server's settings.",
        "  -h, --help     this overview",
        "  -V, --version  the version",
        "",
        "Start here: mnote-mcp demo (a tour of every tool over a real MCP session; docs: README.md).",
    ]
    return "\n".join(lines)


# -- the parser, built from the declarations ---------------------------------------------------------


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Fills in a default whose words need what only --help should load (the tool declarations, which
    bring the MCP SDK: `runtime cli`, started once per call, must not pay for them)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        words = action.help
        option: Option | None = getattr(action, "lazy_default", None)
        if words is not None and option is not None:
            words = words.replace(LAZY_DEFAULT, option.shown_default.replace("%", "%%"))
        return words


LAZY_DEFAULT = "\x00default\x00"


def _describe(option: Option) -> str:
    words = option.setting.help.replace("%", "%%")
    if option.setting.switch:
        return f"{words} [env: {option.env}=1]" if option.env else words
    shown = LAZY_DEFAULT if callable(option.setting.shown) else option.shown_default.replace("%", "%%")
    facts = [f"default: {shown}"]
    if option.env:
        facts.append(f"env: {option.env}")
    return f"{words} [{'; '.join(facts)}]"


def _metavar(option: Option) -> str:
    parse = option.setting.parse
    if isinstance(parse, choice):
        return "{" + ",".join(parse.values) + "}"
    return option.setting.metavar or option.name.upper()


def add_options(parser: argparse.ArgumentParser, config_type: type[Any]) -> None:
    """One argument per declared setting; values stay text until `from_sources` parses them."""
    groups: dict[str, Any] = {}
    environment_only: list[Option] = []
    for option in options(config_type):
        group = option.setting.group
        target: Any = parser if group is None else groups.setdefault(group, parser.add_argument_group(group))
        if option.setting.positional:
            optional = {} if option.setting.required else {"nargs": "?", "default": argparse.SUPPRESS}
            target.add_argument(option.name, metavar=_metavar(option), help=option.setting.help, **optional)
        elif option.flag is None:
            environment_only.append(option)
        elif option.setting.switch:
            target.add_argument(
                option.flag,
                dest=option.name,
                action="store_const",
                const="1",
                default=argparse.SUPPRESS,
                help=_describe(option),
            )
        else:
            action = target.add_argument(
                option.flag,
                dest=option.name,
                default=argparse.SUPPRESS,
                metavar=_metavar(option),
                help=_describe(option),
            )
            if callable(option.setting.shown):
                action.lazy_default = option
    if environment_only:
        lines = [f"  {option.env:24} {option.setting.help}" for option in environment_only]
        parser.epilog = "\n".join(
            ["environment only (never a flag: it would show in process listings):", *lines]
        )


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser, with the flags of every command, or only of the command `only` names
    ("serve", "runtime cli"): argparse reads one command's, and loading the others' settings would
    load the MCP server's for `runtime cli` (see `_config`)."""
    formatter = _HelpFormatter
    parser = argparse.ArgumentParser(
        prog="mnote-mcp", description="MCP server for mnote pages (the mnote.* tools)."
    )
    parser.add_argument("-V", "--version", action="version", version=f"mnote-mcp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (config_type, summary) in COMMANDS.items():
        command = sub.add_parser(name, help=summary, description=summary, formatter_class=formatter)
        if only in (None, name):
            add_options(command, config_type())
        if name == "serve":
            others = ", ".join(c for c in SUBCOMMANDS if c != "serve")
            command.epilog = (command.epilog or "") + (
                f"\n\nserve is the default command. Other commands: {others} (mnote-mcp COMMAND --help)."
            )
        if name == "token":
            command.epilog = (
                (command.epilog or "")
                + "\n\nAlso: "
                + "; ".join(
                    f"mnote-mcp token {word}: {summary}" for word, (_, summary) in TOKEN_COMMANDS.items()
                )
            )
    runtime = sub.add_parser("runtime", help="the reference runtime (the embedded kernel)")
    runtime_sub = runtime.add_subparsers(dest="runtime_command", metavar="COMMAND", required=True)
    for name, (config_type, summary) in RUNTIME_COMMANDS.items():
        command = runtime_sub.add_parser(name, help=summary, description=summary, formatter_class=formatter)
        if only in (None, f"runtime {name}"):
            add_options(command, config_type())
    return parser


def parse(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> tuple[str, Any]:
    """(command, its configuration) from the arguments and the environment; `runtime X` is "runtime X".

    Raises `SettingError` for a value that does not parse, and `SystemExit` for what argparse refuses
    or answers itself (`--help`, `--version`, an unknown flag).
    """
    argv = list(argv)
    environ = os.environ if environ is None else environ
    if argv[:1] == ["help"]:  # `mnote-mcp help` is the overview, `mnote-mcp help COMMAND` its help
        argv = [*argv[1:], "--help"] if argv[1:] else ["--help"]
        if argv[0] != "--help" and " ".join(argv[:-1]) not in COMMAND_WORDS:
            raise SettingError(
                f"help: no command {' '.join(argv[:-1])!r}; commands: {', '.join(COMMAND_WORDS)}"
            )
    if argv[:1] == ["token"] and argv[1:2] and argv[1] in TOKEN_COMMANDS:
        return _parse_token_command(argv[1], argv[2:], environ)
    if argv[:1] in (["-h"], ["--help"]):
        print(overview())  # the commands first; each command's `--help` lists its flags
        raise SystemExit(0)
    if argv[:1] in (["-V"], ["--version"]):
        print(f"mnote-mcp {__version__}")
        raise SystemExit(0)
    if not argv or argv[0] not in SUBCOMMANDS:
        argv.insert(0, "serve")
    args = build_parser(" ".join(argv[:2]) if argv[0] == "runtime" else argv[0]).parse_args(argv)
    given = {name: value for name, value in vars(args).items() if name not in ("command", "runtime_command")}
    if args.command == "runtime":
        runtime_config = from_sources(RUNTIME_COMMANDS[args.runtime_command][0](), given, environ)
        if isinstance(runtime_config, (RuntimeConfig, RuntimeCliConfig)):
            _ = runtime_config.seeds_demo  # as for serve
        return f"runtime {args.runtime_command}", runtime_config
    config = from_sources(COMMANDS[args.command][0](), given, environ)
    from mnote_mcp.config import ServerConfig  # imported by `_config` above: only for these commands

    if isinstance(config, ServerConfig):
        _ = config.seeds_demo  # --demo with --no-demo, or on PostgreSQL: a usage error
        _ = config.confirmation  # a confirmation handle longer than --max-id-chars: a usage error
        from mnote_mcp.tools.catalog import ALL_TOOLS

        try:
            config.tool_selection.select(ALL_TOOLS)  # a glob that selects nothing is a usage error
        except ValueError as exc:
            raise SettingError(str(exc)) from None
    return args.command, config


def _parse_token_command(word: str, argv: list[str], environ: Mapping[str, str]) -> tuple[str, Any]:
    config_type, summary = TOKEN_COMMANDS[word]
    parser = argparse.ArgumentParser(
        prog=f"mnote-mcp token {word}",
        description=summary,
        formatter_class=_HelpFormatter,
    )
    add_options(parser, config_type())
    return f"token {word}", from_sources(config_type(), vars(parser.parse_args(argv)), environ)


# -- running a command --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up creates hundreds of thousands of objects (the SDK's models and schemas) and none of
    # them is garbage: collecting while importing only costs time. `serve` freezes them and turns
    # the collector back on once it is ready (mnote_mcp.serve.settle_memory); so does the `finally`.
    gc.disable()
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    finally:
        gc.enable()


def _main(argv: Sequence[str]) -> int:
    try:
        command, config = parse(argv)
    except SystemExit as exit:  # argparse: --help, --version, or a usage error it printed
        return exit.code if isinstance(exit.code, int) else USAGE_ERROR
    except SettingError as exc:
        print(f"mnote-mcp: {exc}", file=sys.stderr)
        return USAGE_ERROR
    if command != "serve":
        gc.enable()  # only serving has a start-up worth sparing the collector
    configure_logging(config.log_level, config.log_format)
    try:
        if command == "serve":
            import anyio

            from mnote_mcp.base.allocator import limit_arenas
            from mnote_mcp.serve import loop_options, serve

            limit_arenas(config.malloc_arenas)
            anyio.run(serve, config, backend_options=loop_options(config))
            return 0
        status: int = RUNNERS[command](config)
        return status
    except KeyboardInterrupt:
        return 130
    except StoreUnavailableError as exc:
        print(f"mnote-mcp: {exc}", file=sys.stderr)
        return STORE_UNAVAILABLE
    except (ValueError, OSError) as exc:  # configuration errors, AuthConfigError included
        print(f"mnote-mcp: {exc}", file=sys.stderr)
        return USAGE_ERROR


def _demo(config: DemoConfig) -> int:
    import anyio

    from mnote_mcp.demo import run_demo

    return anyio.run(run_demo, config.locale)


def _runtime_serve(config: RuntimeConfig) -> int:
    from mnote_mcp.kernel.databases.stores import describe, open_kernel
    from mnote_mcp.runtime.http_app import serve_runtime

    token, token_path = _runtime_service_token(config)

    db = store_or_default(config.db)
    serve_runtime(
        lambda: open_kernel(db, seed=config.seed, demo=config.seeds_demo, **config.store_options()),
        host=config.host,
        port=config.port,
        token=token,
        token_path=token_path,
        record=config.record,
        description=describe(db),
        limits=config.client_limits,
        max_audit_records=config.max_audit_records,
        shutdown_grace=config.shutdown_grace,
    )
    return 0


def _runtime_service_token(config: RuntimeConfig) -> tuple[str | None, Path | None]:
    """The token `runtime serve` requires, or the file to keep a generated one in: MNOTE_RUNTIME_TOKEN
    or --token-file; else, on loopback, the default file a relay on this machine reads (generated
    once the store is open, so a store error stays the one error); neither only with
    --unsafe-no-auth. Beyond loopback a token must be given (serve_runtime refuses to start)."""
    from mnote_mcp.base.net import is_loopback
    from mnote_mcp.base.secretfiles import read_secret

    if config.unsafe_no_auth:
        if config.token or config.token_file is not None:
            raise ValueError("--unsafe-no-auth and a service token are both set: keep one")
        if not is_loopback(config.host):
            raise ValueError("--unsafe-no-auth is only allowed on a loopback address")
        logger.warning(
            "!!! --unsafe-no-auth: every local process can read and write as any actor through %s !!!",
            config.host,
        )
        return None, None
    if config.token_file is not None:
        if config.token:
            raise ValueError("MNOTE_RUNTIME_TOKEN and --token-file are both set: keep one")
        return read_secret(config.token_file), None
    if config.token or not is_loopback(config.host):
        return config.token, None
    return None, default_runtime_token_path()


def _runtime_cli(config: RuntimeCliConfig) -> int:
    from mnote_mcp.kernel.databases.stores import open_kernel
    from mnote_mcp.runtime.cli_adapter import main as answer_one

    db = store_or_default(config.db)
    return answer_one(
        lambda: open_kernel(
            db, demo=config.seeds_demo, one_call=True, **(config.store_options() | {"pool_size": 1})
        ),
        max_bytes=config.max_body_bytes,
    )


def _runtime_check(config: RuntimeCheckConfig) -> int:
    """The conformance kit: write its seed, or check a runtime and report (exit 1 when a check failed)."""
    from mnote_mcp.conformance.options import KitOptions

    options = KitOptions(
        tag=config.tag,
        request_timeout=config.request_timeout,
        total_timeout=config.total_timeout,
        limits=config.page_limits,
        shown_chars=config.max_shown_chars,
        skip=config.skip,
    )
    if config.write_seed is not None:
        if config.target:
            raise ValueError("--write-seed writes the seed and exits: load it, then run the check without it")
        return _write_seed(config.write_seed, options.tag)
    if not config.target:
        raise ValueError(
            "runtime check: name the runtime (http://HOST:PORT or cli:PATH [ARGS...]), or --write-seed FILE"
        )
    import anyio

    from mnote_mcp.conformance.kit import run_kit

    token = None
    if not config.target.startswith("cli:"):
        token = service_token(config.runtime_token, config.runtime_token_file) or local_service_token(
            config.target
        )
    report = anyio.run(partial(run_kit, config.target, options, token=token))
    sys.stdout.write(report.json() if config.report_format == "json" else report.text())
    sys.stdout.flush()
    if config.junit is not None:
        config.junit.write_text(report.junit(), encoding="utf-8")
    return 0 if report.passed else CHECK_FAILED


def _write_seed(dest: Path, tag: str) -> int:
    from mnote_mcp.conformance.seed import Scratch

    text = json.dumps(Scratch(tag).fixture(), ensure_ascii=False, indent=1) + "\n"
    if str(dest) == "-":
        sys.stdout.write(text)
    else:
        dest.write_text(text, encoding="utf-8")
    print(
        f"mnote-mcp: the kit's seed for tag {tag}{'' if str(dest) == '-' else f' is in {dest}'}: load it into the"
        " runtime (the reference runtime: runtime serve --seed FILE, or mnote-mcp seed --db PATH FILE), then"
        f" mnote-mcp runtime check RUNTIME --tag {tag}",
        file=sys.stderr,
    )
    return 0


def _open_store(db: Path | str | None, *, read_only: bool = False) -> Store:
    from mnote_mcp.kernel.databases.stores import open_store

    return open_store(store_or_default(db), read_only=read_only)


def _migrate(config: MigrateConfig) -> int:
    """Open the store (which migrates it) and say which schema steps it has, in order."""
    store = _open_store(config.db)
    try:
        with store.transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT version, applied_at, detail FROM schema_migrations ORDER BY version"
            ).fetchall()
    finally:
        store.close()
    steps = [{"version": version, "appliedAt": at, "detail": detail} for version, at, detail in rows]
    version = max((step["version"] for step in steps), default=0)
    print(json.dumps({"store": store.location, "schemaVersion": version, "migrations": steps}))
    return 0


def _seed(config: SeedConfig) -> int:
    from mnote_mcp.kernel.store.fixtures import load_fixture, read_fixture

    store = _open_store(config.db)
    try:
        report = load_fixture(store, read_fixture(config.fixture), replace=config.replace)
    finally:
        store.close()
    print(json.dumps({"store": store.location, **report.to_json()}))  # the report's lines went to stderr
    return 0


def _backup(config: BackupConfig) -> int:
    from mnote_mcp.kernel.databases.backup import backup_sqlite
    from mnote_mcp.kernel.databases.stores import is_postgres

    db = store_or_default(config.db)
    if is_postgres(db):
        raise ValueError(
            "backup copies a SQLite store; back a PostgreSQL one up with pg_dump -Fc"
            " (docs/deploy.md, Backups and restores)"
        )
    print(json.dumps(backup_sqlite(Path(db), config.dest).to_json()))
    return 0


def _audit(config: AuditConfig) -> int:
    """Print the audit trail; the store is only read (a backup on a read-only mount will do), never
    created, migrated or changed."""
    store = _open_store(config.db, read_only=True)
    try:
        records = store.audit_trail(trace_id=config.trace, command_id=config.command_id, limit=config.limit)
    finally:
        store.close()
    for record in records:
        print(json.dumps(record, ensure_ascii=False))
    if records or not (config.trace or config.command_id):
        return 0
    asked = " and ".join(
        f"{name} {value}"
        for name, value in (("traceId", config.trace), ("commandId", config.command_id))
        if value
    )
    print(f"mnote-mcp: no audit record with {asked} in {_open_store_name(config.db)}", file=sys.stderr)
    return 1


def _open_store_name(db: Path | str | None) -> str:
    from mnote_mcp.kernel.databases.stores import describe

    location = store_or_default(db)
    return describe(location).removeprefix("sqlite:")


def _token(config: TokenConfig) -> int:
    from mnote_mcp.transports.auth.tokens import TokenGrant, add_token

    grant = TokenGrant(
        actor_id=config.actor,
        scopes=config.scopes,
        workspaces=frozenset(config.workspaces) if config.workspaces else None,
        name=config.name,
    )
    print(add_token(config.auth_file, grant))
    print(
        f"token for {config.actor} added to {config.auth_file}; it is shown only this once", file=sys.stderr
    )
    return 0


def _token_list(config: TokenListConfig) -> int:
    from mnote_mcp.transports.auth.tokens import list_tokens

    for entry in list_tokens(config.auth_file):
        print(json.dumps(entry, ensure_ascii=False))
    return 0


def _token_revoke(config: TokenRevokeConfig) -> int:
    from mnote_mcp.transports.auth.tokens import revoke_token

    removed = revoke_token(config.auth_file, config.token_id)
    if removed is None:
        print(
            f"mnote-mcp: no token {config.token_id} in {config.auth_file} (mnote-mcp token list)",
            file=sys.stderr,
        )
        return 1
    print(
        f"token {config.token_id} of {removed['actorId']} removed from {config.auth_file}; a server reading"
        " it refuses the token from its next check (--auth-reload-interval)",
        file=sys.stderr,
    )
    return 0


RUNNERS: dict[str, Any] = {
    "seed": _seed,
    "audit": _audit,
    "backup": _backup,
    "migrate": _migrate,
    "token": _token,
    "token list": _token_list,
    "token revoke": _token_revoke,
    "demo": _demo,
    "runtime serve": _runtime_serve,
    "runtime cli": _runtime_cli,
    "runtime check": _runtime_check,
}
