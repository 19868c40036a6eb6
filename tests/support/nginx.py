"""nginx (Debian's package) running the shipped examples/nginx.postgres.conf for the deployment tests.

The shipped file is an http-context file (what a distribution's nginx.conf includes from conf.d/); a
minimal main configuration around it gives nginx its pid file, logs and temporary paths under the
test's folder. In the shipped file only addresses, ports and file paths change (`shipped_config`): the
replicas' `replica-a:8765`, the listening ports and the certificate. A test certificate for 127.0.0.1
is made with `openssl`.

Where nginx is not installed the tests that need it are skipped with the reason, unless
`MNOTE_REQUIRE_NGINX=1` (`.ci/run` installs nginx-light and sets it), where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.helpers import ROOT
from tests.support.timing import patience

REQUIRED = os.environ.get("MNOTE_REQUIRE_NGINX") == "1"
SHIPPED = ROOT / "examples" / "nginx.postgres.conf"
# One line per request: what the tests read back (which replica served which session).
LOG_FORMAT = "$remote_addr $status $request_method $uri session=$http_mcp_session_id upstream=$upstream_addr"


def nginx_binary() -> str:
    found = shutil.which("nginx") or next(
        (path for path in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(path, os.X_OK)), None
    )
    if found is None:
        reason = "nginx is not installed (apt-get install nginx-light; .ci/run does as root)"
        if REQUIRED:
            pytest.fail(f"{reason} (MNOTE_REQUIRE_NGINX=1)")
        pytest.skip(reason)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass(frozen=True)
class Certificate:
    cert: Path
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """What a client that trusts this certificate (and nothing else) uses."""
        return ssl.create_default_context(cafile=str(self.cert))


def make_certificate(folder: Path) -> Certificate:
    """A self-signed certificate for 127.0.0.1 and localhost, valid for a day."""
    cert, key = folder / "mnote.crt", folder / "mnote.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=patience(60),
    )  # fmt: skip
    return Certificate(cert, key)


def shipped_config(
    replicas: Mapping[str, str], *, http_port: int, https_port: int, certificate: Certificate
) -> str:
    """examples/nginx.postgres.conf with the replicas' addresses (`{"a": "127.0.0.1:PORT", ...}`), the
    ports and the certificate's paths put in; every other line as shipped. Each substitution must find
    its text, so a reshaped file fails here rather than run something else."""
    text = SHIPPED.read_text(encoding="utf-8")
    changes = {
        **{rf"\breplica-{tag}:8765\b": address for tag, address in replicas.items()},
        r"\blisten 8080;": f"listen 127.0.0.1:{http_port};",
        r"\blisten 8443 ssl;": f"listen 127.0.0.1:{https_port} ssl;",
        r":8443\$request_uri": f":{https_port}$request_uri",
        r"/etc/nginx/tls/mnote\.crt": str(certificate.cert),
        r"/etc/nginx/tls/mnote\.key": str(certificate.key),
    }
    for pattern, value in changes.items():
        text, count = re.subn(pattern, lambda _, value=value: value, text)  # type: ignore[misc]
        assert count, f"{SHIPPED.name} no longer has {pattern!r}"
    return text


@dataclass
class Proxy:
    https_url: str
    http_url: str
    access_log: Path
    error_log: Path
    process: subprocess.Popen[bytes]

    def requests(self) -> list[dict[str, str]]:
        """The access log so far, one dict per request (status, method, uri, session, upstream)."""
        lines = self.access_log.read_text(encoding="utf-8").splitlines() if self.access_log.exists() else []
        entries = []
        for line in lines:
            head, _, rest = line.partition(" session=")
            session, _, upstream = rest.partition(" upstream=")
            address, status, method, uri = head.split(" ", 3)
            entries.append(
                {"address": address, "status": status, "method": method, "uri": uri}
                | {"session": "" if session == "-" else session, "upstream": upstream}
            )
        return entries


@contextmanager
def nginx(
    site: str, folder: Path, *, https_port: int, http_port: int, worker_connections: int = 1024
) -> Iterator[Proxy]:
    """nginx in the foreground serving `site` (an http-context file), stopped when the block ends
    (`worker_connections`: more for bench/capacity.py's thousand clients)."""
    binary = nginx_binary()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "site.conf").write_text(site, encoding="utf-8")
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # As root, nginx's workers would switch to `nobody`, who may not enter a test's private folder.
    user = "user root;\n" if os.geteuid() == 0 else ""
    (folder / "nginx.conf").write_text(
        f"""{user}worker_processes 1;
error_log {folder / "error.log"} info;
pid {folder / "nginx.pid"};
events {{ worker_connections {worker_connections}; }}
http {{
    log_format mnote '{LOG_FORMAT}';
    access_log {folder / "access.log"} mnote;
{temp}
    include {folder / "site.conf"};
}}
""",
        encoding="utf-8",
    )
    command = [binary, "-p", str(folder), "-c", str(folder / "nginx.conf")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=patience(30))
    assert checked.returncode == 0, f"nginx -t refused the configuration:\n{checked.stderr}"
    process = subprocess.Popen(
        [*command, "-g", "daemon off;"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    proxy = Proxy(
        https_url=f"https://127.0.0.1:{https_port}",
        http_url=f"http://127.0.0.1:{http_port}",
        access_log=folder / "access.log",
        error_log=folder / "error.log",
        process=process,
    )
    try:
        deadline = time.monotonic() + patience(30)
        while not _accepts(https_port):
            if process.poll() is not None or time.monotonic() > deadline:
                error = process.stderr.read().decode() if process.stderr else ""
                raise RuntimeError(f"nginx did not start: {error}")
            time.sleep(0.05)
        yield proxy
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGQUIT)  # graceful: open streams end, then the workers
            try:
                process.wait(timeout=patience(10))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True
