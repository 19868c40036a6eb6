"""The `mnote-mcp` command: serve (the default), seed, audit, demo, runtime.

Every serve flag has an `MNOTE_*` environment twin (flag wins), because MCP hosts such as Hermes
configure servers through `env:` as often as through `args:`.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from mnote_mcp import __version__
from mnote_mcp.config import (
    DEFAULT_ACTOR,
    DEFAULT_MAX_RESULT_CHARS,
    MIN_RESULT_CHARS,
    ServerConfig,
    default_store_path,
)
from mnote_mcp.delivery import REFUSAL_STYLES, RESULT_FORMS
from mnote_mcp.identity import parse_scopes
from mnote_mcp.logs import configure_logging

logger = logging.getLogger("mnote_mcp")
SUBCOMMANDS = ("serve", "seed", "audit", "demo", "token", "runtime")


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"MNOTE_{name}", default)


def _env_flag(name: str) -> bool:
    return (_env(name) or "").strip().lower() in ("1", "true", "yes", "on")


def _add_serve_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=["stdio", "sse", "http"], default=_env("TRANSPORT", "stdio"))
    parser.add_argument("--host", default=_env("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(_env("PORT", "8765") or 8765))
    parser.add_argument(
        "--db", type=Path, default=_env("DB"), help="embedded kernel store (default: per-user)"
    )
    parser.add_argument(
        "--kernel",
        default=_env("KERNEL", "local"),
        help="local | http://HOST:PORT (token: MNOTE_RUNTIME_TOKEN) | 'cli:PATH [ARGS...]'",
    )
    parser.add_argument(
        "--runtime-timeout",
        type=float,
        default=float(_env("RUNTIME_TIMEOUT", "10") or 10),
        help="seconds per runtime request (http, cli kernels)",
    )
    parser.add_argument(
        "--runtime-retries",
        type=int,
        default=int(_env("RUNTIME_RETRIES", "2") or 2),
        help="retries of a failed runtime request where safe (http kernel)",
    )
    parser.add_argument("--actor", default=_env("ACTOR", DEFAULT_ACTOR), help="the identity on stdio")
    parser.add_argument("--scope", default=_env("SCOPE", "page.read,page.write,artifact.write"))
    parser.add_argument("--read-only", action="store_true", default=_env_flag("READ_ONLY"))
    parser.add_argument(
        "--tool-names", choices=["dotted", "underscore"], default=_env("TOOL_NAMES", "dotted")
    )
    parser.add_argument("--strict-contract", action="store_true", default=_env_flag("STRICT_CONTRACT"))
    parser.add_argument(
        "--toolsets", default=_env("TOOLSETS", ""), help="expose these toolsets: page,block,artifact"
    )
    parser.add_argument(
        "--tools", default=_env("TOOLS", ""), help="expose tools matching these globs (either spelling)"
    )
    parser.add_argument(
        "--exclude-tools", default=_env("EXCLUDE_TOOLS", ""), help="hide tools matching these globs"
    )
    parser.add_argument(
        "--watch-interval",
        type=float,
        default=_env("WATCH_INTERVAL", "1.0"),  # a string default goes through type=float too
        help="seconds between revision polls for resource subscriptions",
    )
    parser.add_argument("--seed", type=Path, default=_env("SEED"), help="load this fixture before serving")
    parser.add_argument(
        "--no-demo", action="store_true", default=_env_flag("NO_DEMO"), help="keep a new store empty"
    )
    parser.add_argument("--locale", choices=["zh-CN", "en"], default=_env("LOCALE", "zh-CN"))
    parser.add_argument(
        "--session-id", default=_env("SESSION_ID"), help="bind this sessionId to the connection"
    )
    parser.add_argument("--run-id", default=_env("RUN_ID"), help="bind this runId to the connection")
    parser.add_argument("--trace-id", default=_env("TRACE_ID"), help="bind this traceId to the connection")
    parser.add_argument("--call-timeout", type=float, default=float(_env("CALL_TIMEOUT", "60") or 60))
    parser.add_argument(
        "--refusals",
        choices=list(REFUSAL_STYLES),
        default=_env("REFUSALS", "error"),
        help="error: refusals are isError results (the spec's default); result: refusals caused by the"
        " call are ok:false envelopes without isError (Hermes), real failures keep isError",
    )
    parser.add_argument(
        "--result-form",
        choices=list(RESULT_FORMS),
        default=_env("RESULT_FORM", "both"),
        help="both: structuredContent and a text copy; structured: no text copy (Hermes); text: no"
        " structuredContent (tools then declare no outputSchema)",
    )
    parser.add_argument(
        "--max-result-chars",
        type=int,
        default=int(_env("MAX_RESULT_CHARS", str(DEFAULT_MAX_RESULT_CHARS)) or DEFAULT_MAX_RESULT_CHARS),
        help="no result larger than this many characters of envelope JSON: long pages come in pieces"
        f" (default {DEFAULT_MAX_RESULT_CHARS})",
    )
    http = parser.add_argument_group("HTTP transports (--transport sse|http)")
    http.add_argument(
        "--stateless", action="store_true", default=_env_flag("STATELESS"), help="no session state"
    )
    http.add_argument("--no-sse", action="store_true", default=_env_flag("NO_SSE"), help="turn /sse off")
    http.add_argument("--no-streamable-http", action="store_true", default=_env_flag("NO_STREAMABLE_HTTP"))
    http.add_argument("--auth-file", type=Path, default=_env("AUTH_FILE"), help="tokens file (mode 0600)")
    http.add_argument(
        "--token-file", type=Path, default=_env("TOKEN_FILE"), help="where a generated token goes"
    )
    http.add_argument("--unsafe-no-auth", action="store_true", default=_env_flag("UNSAFE_NO_AUTH"))
    http.add_argument(
        "--allowed-hosts", default=_env("ALLOWED_HOSTS", ""), help="comma-separated Host values"
    )
    http.add_argument(
        "--allowed-origins", default=_env("ALLOWED_ORIGINS", ""), help="comma-separated Origins"
    )
    http.add_argument("--max-body-bytes", type=int, default=int(_env("MAX_BODY_BYTES", str(4 << 20)) or 0))
    http.add_argument("--shutdown-grace", type=float, default=float(_env("SHUTDOWN_GRACE", "30") or 30))
    _add_log_flags(parser)


def _add_log_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level", default=_env("LOG_LEVEL", "info"), choices=["debug", "info", "warning", "error"]
    )
    parser.add_argument("--log-format", default=_env("LOG_FORMAT", "text"), choices=["text", "json"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mnote-mcp", description="MCP server for mnote pages (the mnote.* tools)."
    )
    parser.add_argument("--version", action="version", version=f"mnote-mcp {__version__}")
    sub = parser.add_subparsers(dest="command")
    _add_serve_flags(sub.add_parser("serve", help="serve the mnote.* tools (default command)"))
    seed = sub.add_parser("seed", help="load a workspace fixture into a store")
    seed.add_argument("--db", type=Path, default=_env("DB"))
    seed.add_argument("fixture", type=Path)
    _add_log_flags(seed)
    audit = sub.add_parser("audit", help="read the audit trail of a store")
    audit.add_argument("--db", type=Path, default=_env("DB"))
    audit.add_argument("--trace", help="only records of this traceId")
    audit.add_argument("--command-id", help="only the record of this commandId")
    audit.add_argument("--limit", type=int, default=100)
    _add_log_flags(audit)
    token = sub.add_parser("token", help="mint a bearer token into a tokens file (printed once)")
    token.add_argument("--auth-file", type=Path, required=True, help="tokens file, created 0600 if new")
    token.add_argument("--actor", required=True, help="the actor the token acts as")
    token.add_argument("--scope", default="page.read,page.write,artifact.write")
    token.add_argument(
        "--workspaces", default="", help="comma-separated workspace ids the token is limited to"
    )
    token.add_argument("--name", help="a label for the token")
    _add_log_flags(token)
    demo = sub.add_parser("demo", help="a scripted tour of every tool over a real stdio MCP session")
    demo.add_argument("--locale", choices=["zh-CN", "en"], default=_env("LOCALE", "en"))
    _add_log_flags(demo)
    _add_runtime_commands(sub.add_parser("runtime", help="the reference runtime (the embedded kernel)"))
    return parser


def _add_runtime_commands(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="runtime_command", required=True)
    http = sub.add_parser("serve", help="serve the embedded kernel over the runtime protocol v1 (HTTP)")
    http.add_argument("--db", type=Path, default=_env("DB"), help="the kernel store (default: per-user)")
    http.add_argument("--host", default=_env("RUNTIME_HOST", "127.0.0.1"))
    http.add_argument("--port", type=int, default=int(_env("RUNTIME_PORT", "8766") or 8766))
    http.add_argument(
        "--token", default=_env("RUNTIME_TOKEN"), help="service token to require (MNOTE_RUNTIME_TOKEN)"
    )
    http.add_argument("--seed", type=Path, default=_env("SEED"), help="load this fixture before serving")
    http.add_argument("--no-demo", action="store_true", default=_env_flag("NO_DEMO"))
    http.add_argument("--record", type=Path, help="append each request's headers here (JSON lines; tests)")
    _add_log_flags(http)
    cli = sub.add_parser("cli", help="answer one mnote-cli JSON request from stdin on stdout")
    cli.add_argument("--db", type=Path, default=_env("DB"), help="the kernel store (default: per-user)")
    cli.add_argument("--no-demo", action="store_true", default=_env_flag("NO_DEMO"))
    cli.add_argument(
        "--log-level", default=_env("LOG_LEVEL", "warning"), choices=["debug", "info", "warning", "error"]
    )
    cli.add_argument("--log-format", default=_env("LOG_FORMAT", "text"), choices=["text", "json"])


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    """The serve configuration; raises ValueError (a usage error) for a selection that names nothing."""
    bindings = {
        name: value
        for name, value in (
            ("sessionId", args.session_id),
            ("runId", args.run_id),
            ("traceId", args.trace_id),
        )
        if value
    }
    if args.watch_interval <= 0:
        raise ValueError("--watch-interval must be a positive number of seconds")
    if args.max_result_chars < MIN_RESULT_CHARS:
        raise ValueError(f"--max-result-chars must be at least {MIN_RESULT_CHARS}")
    config = ServerConfig(
        transport=args.transport,
        host=args.host,
        port=args.port,
        db=args.db,
        kernel=args.kernel,
        actor=args.actor or None,
        scopes=parse_scopes(args.scope.split(",")),
        read_only=args.read_only,
        tool_names=args.tool_names,
        strict_contract=args.strict_contract,
        seed=args.seed,
        demo=not args.no_demo,
        locale=args.locale,
        log_level=args.log_level,
        log_format=args.log_format,
        bindings=bindings,
        call_timeout=args.call_timeout,
        refusals=args.refusals,
        result_form=args.result_form,
        max_result_chars=args.max_result_chars,
        stateless=args.stateless,
        sse=not args.no_sse,
        streamable_http=not args.no_streamable_http,
        auth_file=args.auth_file,
        token=os.environ.get("MNOTE_TOKEN") or None,
        token_file=args.token_file,
        unsafe_no_auth=args.unsafe_no_auth,
        allowed_hosts=_csv(args.allowed_hosts),
        allowed_origins=_csv(args.allowed_origins),
        max_body_bytes=args.max_body_bytes,
        shutdown_grace=args.shutdown_grace,
        toolsets=frozenset(_csv(args.toolsets)),
        tools=_csv(args.tools),
        exclude_tools=_csv(args.exclude_tools),
        watch_interval=args.watch_interval,
        runtime_token=os.environ.get("MNOTE_RUNTIME_TOKEN") or None,
        runtime_timeout=args.runtime_timeout,
        runtime_retries=args.runtime_retries,
    )
    from mnote_mcp.tools import ALL_TOOLS

    config.tool_selection.select(ALL_TOOLS)  # a name or glob that selects nothing is a usage error
    return config


def _csv(value: str) -> tuple[str, ...]:
    """A comma-separated flag value as its non-empty items."""
    return tuple(item.strip() for item in value.split(",") if item.strip())


def main(argv: Sequence[str] | None = None) -> int:
    # Start-up creates hundreds of thousands of objects (the SDK's models and schemas) and none of
    # them is garbage: collecting while importing only costs time. `serve` freezes them and turns
    # the collector back on once it is ready (mnote_mcp.serve.settle_memory); so does the `finally`.
    gc.disable()
    try:
        return _main(argv)
    finally:
        gc.enable()


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv.insert(0, "serve")
    args = build_parser().parse_args(argv)
    if args.command != "serve":
        gc.enable()  # only serving has a start-up worth sparing the collector
    configure_logging(args.log_level, args.log_format)
    try:
        if args.command == "serve":
            from mnote_mcp.serve import serve

            anyio.run(serve, config_from_args(args))
        elif args.command == "seed":
            return _seed(args)
        elif args.command == "audit":
            return _audit(args)
        elif args.command == "token":
            return _token(args)
        elif args.command == "demo":
            from mnote_mcp.demo import run_demo

            return anyio.run(run_demo, args.locale)
        elif args.command == "runtime":
            return _runtime(args)
    except KeyboardInterrupt:
        return 130
    except (ValueError, OSError) as exc:  # configuration errors, AuthConfigError included
        print(f"mnote-mcp: {exc}", file=sys.stderr)
        return 2
    return 0


def _runtime(args: argparse.Namespace) -> int:
    from mnote_mcp.kernel.local import LocalKernel

    db = args.db if args.db is not None else default_store_path()
    if args.runtime_command == "cli":
        from mnote_mcp.runtime.cli_adapter import main as answer_one

        return answer_one(lambda: LocalKernel.open_seeded(db, demo=not args.no_demo))
    from mnote_mcp.runtime.http_app import serve_runtime

    serve_runtime(
        lambda: LocalKernel.open_seeded(db, seed=args.seed, demo=not args.no_demo),
        host=args.host,
        port=args.port,
        token=args.token or None,
        record=args.record,
        description=f"sqlite:{db}",
    )
    return 0


def _open_store(db: Path | None) -> Any:
    from mnote_mcp.kernel.local import LocalStore

    return LocalStore(db if db is not None else default_store_path())


def _seed(args: argparse.Namespace) -> int:
    from mnote_mcp.kernel.local.fixtures import load_fixture, read_fixture

    store = _open_store(args.db)
    try:
        counts = load_fixture(store, read_fixture(args.fixture))
    finally:
        store.close()
    print(json.dumps({"store": str(store.path), **counts}))
    return 0


def _audit(args: argparse.Namespace) -> int:
    store = _open_store(args.db)
    try:
        records = store.audit_trail(trace_id=args.trace, command_id=args.command_id, limit=args.limit)
    finally:
        store.close()
    for record in records:
        print(json.dumps(record, ensure_ascii=False))
    return 0 if records or not (args.trace or args.command_id) else 1


def _token(args: argparse.Namespace) -> int:
    from mnote_mcp.transports.auth import TokenGrant, add_token

    workspaces = _csv(args.workspaces)
    grant = TokenGrant(
        actor_id=args.actor,
        scopes=parse_scopes(args.scope.split(",")),
        workspaces=frozenset(workspaces) if workspaces else None,
        name=args.name,
    )
    print(add_token(args.auth_file, grant))
    print(f"token for {args.actor} added to {args.auth_file}; it is shown only this once", file=sys.stderr)
    return 0
