"""The deployment files that cannot run here, checked as far as this machine allows (issue 23): no
Docker daemon, so examples/compose.postgres.yaml is parsed and every service, command, volume and file
it names is held to what exists (each mnote command parsed by mnote's own command line; `docker
compose config` too where the CLI has compose); the Dockerfile's inputs exist and are not ignored
(`.ci/image` builds and runs the image with buildah); examples/mnote-mcp.service passes
`systemd-analyze verify` where systemd is installed, and its hardening is held field by field.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from packaging.requirements import Requirement

from mnote_mcp.cli import parse
from mnote_mcp.config import ServerConfig
from mnote_mcp.settings import SettingError
from mnote_mcp.tools.cost import DEFAULT_REQUEST_LIMIT
from tests.support.helpers import RAW_INITIALIZE, ROOT
from tests.support.http_helpers import http_server, write_tokens
from tests.support.timing import patience

EXAMPLES = ROOT / "examples"
COMPOSE = EXAMPLES / "compose.postgres.yaml"
NGINX = EXAMPLES / "nginx.postgres.conf"
UNIT = EXAMPLES / "mnote-mcp.service"
DOCKERFILE = ROOT / "Dockerfile"
LOCAL_IMAGE = "mnote-mcp:local"
# Host paths the documented first run makes (the comment atop the compose file, docs/deploy.md).
FIRST_RUN = {"./tls"}
ENVIRONMENT = {"MNOTE_DB_PASSWORD": "a-password"}


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    return loaded


def substituted(value: str) -> str:
    """Compose's `${NAME}`, `${NAME:-default}` and `${NAME:?message}` with ENVIRONMENT's values."""

    def one(found: re.Match[str]) -> str:
        name, _, rest = found.group(1).partition(":")
        if name in ENVIRONMENT:
            return ENVIRONMENT[name]
        assert rest.startswith("-"), f"${{{name}}} has no value here and no default"
        return rest[1:]

    return re.sub(r"\$\{([^}]+)\}", one, value)


def mnote_services(services: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: service for name, service in services.items() if service.get("image") == LOCAL_IMAGE}


def test_every_mnote_command_of_the_compose_file_is_one_mnote_accepts() -> None:
    services = compose()["services"]
    ours = mnote_services(services)
    assert {"migrate", "token", "seed", "replica-a", "replica-b"} <= set(ours)
    for name, service in ours.items():
        entry = service.get("entrypoint", ["mnote-mcp"])
        assert entry[0] == "mnote-mcp", name
        argv = [*entry[1:], *service.get("command", [])]
        if name == "token":
            argv += ["--actor", "user_1"]  # what the first run passes
        environ = {key: substituted(value) for key, value in service.get("environment", {}).items()}
        try:
            _, config = parse(argv, environ=environ)
        except SettingError as exc:
            pytest.fail(f"{name}: mnote-mcp {shlex.join(argv)}: {exc}")
        if isinstance(config, ServerConfig):
            assert config.transport == "http" and config.auth_file is not None
            assert config.db is not None and str(config.db).startswith(
                "postgresql://mnote:a-password@postgres"
            )
            assert not config.seeds_demo, "a PostgreSQL store never gets the demo"
            assert not any("PASSWORD" in word or "a-password" in word for word in argv), "no secret on argv"


def test_the_compose_file_names_only_what_exists() -> None:
    spec = compose()
    services, volumes = spec["services"], set(spec.get("volumes") or {})
    for name, service in services.items():
        for needed in service.get("depends_on", {}):
            assert needed in services, f"{name} depends on {needed}"
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            if source.startswith((".", "/")):
                on_host = (COMPOSE.parent / source).resolve()
                assert on_host.exists() or source in FIRST_RUN, f"{name}: {source} does not exist"
            else:
                assert source in volumes, f"{name}: volume {source} is not declared"
        build = service.get("build")
        if build:
            context = (COMPOSE.parent / build["context"]).resolve()
            assert (context / build.get("dockerfile", "Dockerfile")).is_file()
    images = {service.get("image") for service in services.values()}
    assert any(service.get("build") for service in mnote_services(services).values()), "the image is built"
    assert images <= {LOCAL_IMAGE, "postgres:16", "nginx:1.27"}, images
    assert not any("pip install" in str(service.get("command")) for service in services.values())


def test_the_replicas_proxy_and_tokens_fit_together() -> None:
    services = compose()["services"]
    nginx = NGINX.read_text(encoding="utf-8")
    (conf_mount,) = [m for m in services["proxy"]["volumes"] if m.startswith("./nginx.postgres.conf:")]
    assert conf_mount.split(":")[1].startswith("/etc/nginx/conf.d/")
    tls_mount = next(m for m in services["proxy"]["volumes"] if m.startswith("./tls:"))
    for path in re.findall(r"ssl_certificate(?:_key)? (\S+);", nginx):
        assert path.startswith(tls_mount.split(":")[1] + "/"), path
    token_file = services["token"]["entrypoint"][services["token"]["entrypoint"].index("--auth-file") + 1]
    for tag in ("a", "b"):
        command = services[f"replica-{tag}"]["command"]
        assert f"replica-{tag}:{command[command.index('--port') + 1]}" in nginx
        assert command[command.index("--session-tag") + 1] == tag and f"~^{tag}\\." in nginx
        assert command[command.index("--auth-file") + 1] == token_file
        assert "tokens:/etc/mnote:ro" in services[f"replica-{tag}"]["volumes"]
    assert "tokens:/etc/mnote" in services["token"]["volumes"]
    assert "install -d -o 10001 -g 10001 -m 0700 /etc/mnote" in DOCKERFILE.read_text(), (
        "the tokens volume starts owned by the image's user, who writes it 0600 and reads it"
    )


def test_the_proxy_bounds_a_tokens_requests_as_one_replica_does() -> None:
    """docs/deploy.md, "Limits across replicas": nginx limits each bearer token to one replica's
    --request-limit default, for the whole fleet (issue 32)."""
    nginx = NGINX.read_text(encoding="utf-8")
    zone = re.search(r"limit_req_zone \$http_authorization zone=(\w+):\w+ rate=(\d+)r/s;", nginx)
    assert zone is not None, "no per-token zone"
    limit = DEFAULT_REQUEST_LIMIT
    assert limit is not None and int(zone.group(2)) * 60 == limit.per_minute
    assert f"limit_req zone={zone.group(1)} burst={limit.burst} nodelay;" in nginx


def test_the_replicas_are_probed_for_readiness_before_the_proxy_starts() -> None:
    """Each replica's health check asks its own /readyz (503 while its store cannot answer); the proxy
    waits for both; the proxy forwards /readyz and /healthz without a token."""
    services = compose()["services"]
    for tag in ("a", "b"):
        replica = services[f"replica-{tag}"]
        port = replica["command"][replica["command"].index("--port") + 1]
        probe = " ".join(replica["healthcheck"]["test"])
        assert f"http://127.0.0.1:{port}/readyz" in probe
        assert services["proxy"]["depends_on"][f"replica-{tag}"] == {"condition": "service_healthy"}
    nginx = NGINX.read_text(encoding="utf-8")
    assert "location = /readyz {" in nginx and "location = /healthz {" in nginx


def test_the_compose_file_says_which_compose_it_needs() -> None:
    """Issue 35: the top-level `name:` needs Compose v2 (2.3.3 on); the file did not say so, and
    `docker-compose` 1.x refuses it. The header and docs/deploy.md say it where a `name:` is used."""
    header = "".join(
        line for line in COMPOSE.read_text(encoding="utf-8").splitlines(True) if line.startswith("#")
    )
    if "name" in compose():
        assert "Docker Compose v2" in header and "2.3.3" in header, header
        deploy = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
        assert "Docker Compose v2" in deploy.split("## Compose", 1)[1].split("\n## ", 1)[0]


def test_docker_compose_accepts_the_file() -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode:
        pytest.skip("no docker CLI with the compose plugin here")
    done = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE), "--profile", "setup", "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=patience(60),
        env={**os.environ, **ENVIRONMENT},
    )
    assert done.returncode == 0, done.stderr


def test_the_image_is_built_from_files_that_exist_and_are_not_ignored() -> None:
    steps = DOCKERFILE.read_text(encoding="utf-8")
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    for sources in re.findall(r"^COPY (.+) \S+$", steps, flags=re.MULTILINE):
        for source in sources.split():
            assert (ROOT / source).exists(), source
            assert f"!{source.rstrip('/')}/" in ignored or f"!{source}" in ignored, f"{source} is ignored"
    assert 'ENTRYPOINT ["mnote-mcp"]' in steps and re.search(r"^USER 10001", steps, flags=re.MULTILINE)
    assert "[postgres,otel]" in steps and "pip install" in steps  # uvloop: a main dependency


def test_a_default_install_brings_uvloop_where_the_platform_has_it() -> None:
    """Issue 34: uvloop was an extra the README's `pip install -e .` and `.[postgres]` left out, so a
    deployment following the docs ran on asyncio. It is a main dependency now (not on Windows, which
    has no wheel), and this environment, installed from pyproject.toml, has it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = {Requirement(text).name: Requirement(text) for text in project["dependencies"]}
    uvloop = requirements["uvloop"]
    assert uvloop.marker is not None
    assert uvloop.marker.evaluate({"sys_platform": "linux"}) and uvloop.marker.evaluate(
        {"sys_platform": "darwin"}
    )
    assert not uvloop.marker.evaluate({"sys_platform": "win32"})
    if sys.platform != "win32":
        assert importlib.util.find_spec("uvloop") is not None


def unit_fields(text: str) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for line in text.replace("\\\n", " ").splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            fields.setdefault(key.strip(), []).append(value.strip())
    return fields


def test_the_systemd_unit_runs_what_a_documented_step_installs() -> None:
    """Issue 35: the unit ran /opt/mnote-mcp/.venv/bin/mnote-mcp, which no step installed. The steps
    atop the unit (and docs/deploy.md's systemd section) make that virtual environment and install
    this package into it."""
    text = UNIT.read_text(encoding="utf-8")
    (start,) = unit_fields(text)["ExecStart"]
    program = Path(shlex.split(start)[0])
    steps = [line.removeprefix("#").strip() for line in text.splitlines() if line.startswith("#   ")]
    venv = program.parent.parent
    made = [step for step in steps if re.search(rf"-m venv {re.escape(str(venv))}(\s|$)", step)]
    installed = [step for step in steps if f"{venv}/bin/pip install " in step]
    assert made and installed, f"no documented step makes {venv} and installs mnote-mcp into it: {steps}"
    source = shlex.split(installed[0].split(f"{venv}/bin/pip install ", 1)[1].split("&&")[0])[0]
    assert source.split("[")[0].rstrip("/") in " ".join(steps), "the source installed is put there first"
    section = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8").split("## systemd", 1)[1]
    assert f"-m venv {venv}" in section and f"{venv}/bin/pip install" in section


def test_the_systemd_unit_answers_its_proxys_host_name(tmp_path: Path) -> None:
    """Issue 35: behind a same-host proxy with a real name, the unit's replica answered 421 (DNS-
    rebinding protection accepts loopback names only, unless --allowed-hosts says more). Its
    ExecStart, run here with a throw-away store and port, accepts the name the unit's comment gives
    the proxy, as nginx sends it (`Host: $host:$server_port`)."""
    (start,) = unit_fields(UNIT.read_text(encoding="utf-8"))["ExecStart"]
    argv = shlex.split(start)[2:]
    _, config = parse(["serve", *argv], environ={"MNOTE_DB": "/var/lib/mnote-mcp/mnote.db"})
    assert isinstance(config, ServerConfig)
    names = [host.split(":")[0] for host in config.allowed_hosts]
    public = [name for name in names if name not in ("127.0.0.1", "localhost", "[::1]")]
    assert public, f"--allowed-hosts names no proxy-facing host: {config.allowed_hosts}"
    tokens = write_tokens(tmp_path / "tokens.json", {"tok-unit": {"actorId": "user_1"}})
    kept: list[str] = []
    skip = {"--port": 1, "--auth-file": 1, "--metrics-listen": 1, "--transport": 1}
    words = iter(argv)
    for word in words:
        if word in skip:
            next(words)
        else:
            kept.append(word)
    with http_server(tmp_path / "unit.db", "--auth-file", str(tokens), *kept) as server:
        port = server.url.rsplit(":", 1)[1]
        listening = next(line for line in server.stderr if "listening on" in line)
        for path in ("/mcp", "/sse", "/healthz", "/readyz"):  # issue 35: /readyz was left out
            assert path in listening, listening
        for host in (f"{public[0]}:443", f"127.0.0.1:{port}"):
            answer = httpx2.post(
                f"{server.url}/mcp",
                json=RAW_INITIALIZE,
                headers={
                    "Host": host,
                    "Authorization": "Bearer tok-unit",
                    "Accept": "application/json, text/event-stream",
                },
                timeout=30,
            )
            assert answer.status_code == 200, (host, answer.status_code, answer.text[:200])


def test_the_systemd_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8")
    fields = unit_fields(text)
    (start,) = fields["ExecStart"]
    argv = shlex.split(start)
    assert argv[0].endswith("/mnote-mcp") and argv[1] == "serve"
    _, config = parse(argv[1:], environ={"MNOTE_DB": "/var/lib/mnote-mcp/mnote.db"})
    assert isinstance(config, ServerConfig) and config.auth_file is not None and not config.seeds_demo
    assert not any("postgresql://" in word for word in argv), (
        "the database URL comes from the environment file"
    )
    hardening = {
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "CapabilityBoundingSet": "",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "SystemCallArchitectures": "native",
        "StateDirectory": "mnote-mcp",
        "UMask": "0077",
        "User": "mnote",
        "RestartPreventExitStatus": "2 3",
    }
    for key, value in hardening.items():
        assert value in fields.get(key, []), (key, fields.get(key))
    assert "@system-service" in fields["SystemCallFilter"]
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed: the fields above are all that was checked")
    unit = tmp_path / UNIT.name  # the unit as installed, its ExecStart this checkout's program
    unit.write_text(
        text.replace("/opt/mnote-mcp/.venv/bin/mnote-mcp", str(ROOT / ".venv" / "bin" / "mnote-mcp"))
    )
    done = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=patience(60)
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


# The MCP registry's server.json (schema 2025-12-11: static.modelcontextprotocol.io/schemas/2025-12-11/
# server.schema.json, as modelcontextprotocol/registry publishes it), the parts this file uses, and the
# official registry's own rules (docs/reference/server-json/official-registry-requirements.md): a
# reverse-DNS name with one slash, a description of at most 100 characters, exact versions (never a
# range or `latest`), a PyPI package whose README names the server (`mcp-name:`).
_VERSION = {"type": "string", "minLength": 1, "not": {"pattern": r"^(latest|[\^~<>=].*|.*[x*].*)$"}}
_INPUT = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "isRequired": {"type": "boolean"},
        "isSecret": {"type": "boolean"},
        "format": {"enum": ["string", "number", "boolean", "filepath"]},
        "default": {"type": "string"},
        "choices": {"type": "array", "items": {"type": "string"}},
    },
    "additionalProperties": False,
}
SERVER_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["$schema", "name", "description", "version"],
    "properties": {
        "$schema": {"const": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"},
        "name": {
            "type": "string",
            "pattern": "^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$",
            "minLength": 3,
            "maxLength": 200,
        },
        "title": {"type": "string", "minLength": 1, "maxLength": 100},
        "description": {"type": "string", "minLength": 1, "maxLength": 100},
        "version": {**_VERSION, "maxLength": 255},
        "packages": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["registryType", "identifier", "version", "transport"],
                "properties": {
                    "registryType": {"enum": ["npm", "pypi", "nuget", "oci", "mcpb"]},
                    "identifier": {"type": "string", "minLength": 1},
                    "version": _VERSION,
                    "runtimeHint": {"type": "string"},
                    "transport": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {"type": {"enum": ["stdio", "streamable-http", "sse"]}},
                    },
                    "environmentVariables": {"type": "array", "items": _INPUT},
                },
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
}


def test_server_json_is_what_the_mcp_registry_takes_and_names_this_release() -> None:
    """Issue 35: a server.json for the MCP registry: valid against the registry's schema (the parts
    used), its name reverse-DNS and named by the README (the registry's PyPI ownership check), its
    versions this release's, its package this project, every variable it names one the server reads."""
    from jsonschema import Draft7Validator

    from mnote_mcp import __version__
    from mnote_mcp.settings import options

    document = json.loads((ROOT / "server.json").read_text(encoding="utf-8"))
    errors = [error.message for error in Draft7Validator(SERVER_JSON_SCHEMA).iter_errors(document)]
    assert not errors, errors
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (package,) = document["packages"]
    assert (package["registryType"], package["identifier"]) == ("pypi", project["name"])
    assert document["version"] == package["version"] == project["version"] == __version__
    assert f"mcp-name: {document['name']}" in (ROOT / "README.md").read_text(encoding="utf-8")
    variables = {option.env: option for option in options(ServerConfig) if option.env}
    for variable in package["environmentVariables"]:
        assert variable["name"] in variables, variable["name"]
        if "default" in variable:
            assert variable["default"] == variables[variable["name"]].shown_default, variable["name"]
