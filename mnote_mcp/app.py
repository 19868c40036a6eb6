"""Wiring: configuration in, a kernel, a registry, a dispatcher and an MCP server out."""

from __future__ import annotations

import logging
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from mcp.server import Server

from mnote_mcp.base.telemetry.tracing import tracing_on
from mnote_mcp.calls.dispatch import Dispatcher
from mnote_mcp.calls.fairshare import FairShare
from mnote_mcp.config import ServerConfig
from mnote_mcp.kernel.port import Kernel
from mnote_mcp.kernel.traced import traced
from mnote_mcp.server import IdentityResolver, create_server
from mnote_mcp.settings import local_service_token, service_token
from mnote_mcp.surface.elicitation import read_keys
from mnote_mcp.surface.resources.pages import PageResources
from mnote_mcp.tools.catalog import ALL_TOOLS
from mnote_mcp.tools.registry import Registry

logger = logging.getLogger(__name__)


@dataclass
class App:
    config: ServerConfig
    kernel: Kernel
    dispatcher: Dispatcher
    store_description: str
    state_keys: tuple[str, ...] = ()  # --confirm-key-file's keys, read once when the app opens

    def server(
        self, identity_for: IdentityResolver | None = None, pages: PageResources | None = None
    ) -> Server[Any]:
        identity = self.config.stdio_identity()
        return create_server(
            self.dispatcher,
            identity_for or (lambda ctx: identity),
            scopes=self.config.granted_scopes,
            watch_interval=self.config.watch_interval,
            delivery=self.config.delivery,
            pages=pages,
            max_completions=self.config.max_completions,
            state_keys=self.state_keys,
            max_subscriptions=self.config.max_subscriptions,
        )


def build_registry(config: ServerConfig) -> Registry:
    """The tools this configuration exposes; raises ValueError for a selection that names nothing."""
    selected = config.tool_selection.select(ALL_TOOLS)
    return Registry(
        selected,
        style=config.tool_names,
        strict=config.strict_contract,
        form=config.schema_form,
        max_id_chars=config.max_id_chars,
        max_block_ids=config.max_block_ids,
    )


def open_kernel(config: ServerConfig) -> tuple[Kernel, str]:
    """The kernel adapter `--kernel` names, and a one-line description of where its data lives.

    Only the embedded kernel has a store here; with a relay adapter the data (and its seeding) belongs
    to the runtime, so `--seed` is refused rather than quietly loading a store nobody reads.
    """
    spec = config.kernel.strip()
    if spec == "local":
        from mnote_mcp.kernel.databases.stores import describe, open_kernel

        kernel = open_kernel(
            config.store,
            seed=config.seed,
            demo=config.seeds_demo,
            **config.store_options(read_only=config.read_only),
        )
        return kernel, describe(config.store)
    if not spec.startswith(("http://", "https://", "cli:")):
        raise ValueError(
            f"unknown kernel {config.kernel!r}; use local, http://HOST:PORT or cli:PATH [ARGS...]"
        )
    if config.seed is not None:
        raise ValueError(
            f"--seed loads the embedded store, but --kernel is {spec}: seed the runtime instead"
            " (mnote-mcp runtime serve --seed FILE, or mnote-mcp seed --db PATH FILE)"
        )
    if spec.startswith("cli:"):
        from mnote_mcp.kernel.relays.cli import CliKernel, parse_command_line

        cli = CliKernel(parse_command_line(spec[len("cli:") :]), timeout=config.runtime_timeout)
        return cli, f"cli:{shlex.join(cli.argv)}"
    from mnote_mcp.kernel.relays.http import HttpKernel

    token = service_token(config.runtime_token, config.runtime_token_file) or local_service_token(spec)
    http = HttpKernel(spec, token=token, timeout=config.runtime_timeout, retries=config.runtime_retries)
    return http, f"{http.base_url} ({'token' if token else 'no token'})"


def kernel_adapter(config: ServerConfig) -> str:
    """The adapter's name for the startup line: local, http, https or cli."""
    return config.kernel.strip().split(":", 1)[0]


@asynccontextmanager
async def open_app(config: ServerConfig) -> AsyncIterator[App]:
    kernel, description = open_kernel(config)
    if tracing_on():  # a span per port call; without tracing, nothing between the tools and the adapter
        kernel = traced(kernel)
    try:
        dispatcher = Dispatcher(
            build_registry(config),
            kernel,
            locale=config.locale,
            read_only=config.read_only,
            call_timeout=config.call_timeout,
            max_result_chars=config.max_result_chars,
            max_argument_depth=config.max_argument_depth,
            confirmation=config.confirmation,
            fair=FairShare(
                config.call_limit_of, requests=config.requests_limit, admission=config.admission_bounds
            ),
        )
        keys = tuple(read_keys(config.confirm_key_file)) if config.confirm_key_file is not None else ()
        yield App(
            config=config,
            kernel=kernel,
            dispatcher=dispatcher,
            store_description=description,
            state_keys=keys,
        )
    finally:
        await kernel.aclose()
