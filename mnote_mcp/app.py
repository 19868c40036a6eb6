"""Wiring: configuration in, a kernel, a registry, a dispatcher and an MCP server out."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from mcp.server import Server

from mnote_mcp.config import ServerConfig
from mnote_mcp.dispatch import Dispatcher
from mnote_mcp.kernel.port import Kernel
from mnote_mcp.server import IdentityResolver, create_server
from mnote_mcp.tools import ALL_TOOLS, Registry

logger = logging.getLogger(__name__)


@dataclass
class App:
    config: ServerConfig
    kernel: Kernel
    dispatcher: Dispatcher
    store_description: str

    def server(self, identity_for: IdentityResolver | None = None) -> Server[Any]:
        identity = self.config.stdio_identity()
        return create_server(
            self.dispatcher, identity_for or (lambda ctx: identity), watch_interval=self.config.watch_interval
        )


def build_registry(config: ServerConfig) -> Registry:
    """The tools this configuration exposes; raises ValueError for a selection that names nothing."""
    selected = config.tool_selection.select(ALL_TOOLS)
    return Registry(selected, style=config.tool_names, strict=config.strict_contract)


def open_kernel(config: ServerConfig) -> tuple[Kernel, str]:
    """The kernel adapter `--kernel` names, and a one-line description of where its data lives."""
    if config.kernel != "local":
        raise ValueError(f"unknown kernel {config.kernel!r}; use 'local'")
    from mnote_mcp.kernel.local import LocalKernel
    from mnote_mcp.kernel.local.fixtures import demo_fixture, load_fixture, read_fixture

    kernel = LocalKernel.open(config.store_path)
    if config.seed is not None:
        load_fixture(kernel.store, read_fixture(config.seed))
    elif kernel.store.created and config.demo:
        load_fixture(kernel.store, demo_fixture())
        logger.info("new store %s seeded with the demo workspace", config.store_path)
    return kernel, f"sqlite:{config.store_path}"


@asynccontextmanager
async def open_app(config: ServerConfig) -> AsyncIterator[App]:
    kernel, description = open_kernel(config)
    try:
        dispatcher = Dispatcher(
            build_registry(config),
            kernel,
            locale=config.locale,
            read_only=config.read_only,
            call_timeout=config.call_timeout,
        )
        yield App(config=config, kernel=kernel, dispatcher=dispatcher, store_description=description)
    finally:
        await kernel.aclose()
