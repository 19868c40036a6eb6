"""The deployment files that cannot run here, checked as far as this machine allows (issue 23): no
Docker daemon, so examples/compose.postgres.yaml is parsed and every service, command, volume and file
it names is held to what exists (each mnote command parsed by mnote's own command line; `docker
compose config` too where the CLI has compose); the Dockerfile's inputs exist and are not ignored
(`.ci/image` builds and runs the image with buildah); examples/mnote-mcp.service passes
`systemd-analyze verify` where systemd is installed, and its hardening is held field by field.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from mnote_mcp.cli import parse
from mnote_mcp.config import ServerConfig, SettingError
from tests.support.helpers import ROOT
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
    assert "[postgres,uvloop,otel]" in steps and "pip install" in steps


def test_the_systemd_unit_verifies_and_is_hardened(tmp_path: Path) -> None:
    text = UNIT.read_text(encoding="utf-8")
    fields: dict[str, list[str]] = {}
    for line in text.replace("\\\n", " ").splitlines():
        if "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            fields.setdefault(key.strip(), []).append(value.strip())
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
