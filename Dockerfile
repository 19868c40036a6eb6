# mnote-mcp as an OCI image: the server (on uvloop, a main dependency), the PostgreSQL store's driver (the
# [postgres] extra) and the OpenTelemetry exporter (the [otel] extra: traces with --otlp-endpoint),
# in a virtual environment on Debian 12's Python 3.11 (docs/deploy.md, "The image").
#   docker build -t mnote-mcp .          (podman build, or buildah bud: the same file)
#   docker run -i --rm mnote-mcp         (stdio on the embedded store, seeded with the demo workspace)
# The compose file (examples/compose.postgres.yaml) runs it as HTTP replicas on PostgreSQL.
# BASE: any Debian 12 (bookworm) root file system; .ci/image builds one with mmdebstrap where no
# registry of images can be reached.
ARG BASE=docker.io/library/debian:bookworm-slim
FROM ${BASE}

RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# PIP_CERT, PIP_INDEX_URL (build arguments): where pip must trust another CA or use a mirror.
ARG PIP_CERT
ARG PIP_INDEX_URL
# Only what the wheel is built from (.dockerignore keeps the rest of the checkout out).
COPY pyproject.toml README.md /src/
COPY mnote_mcp /src/mnote_mcp
RUN python3 -m venv /opt/mnote \
    && /opt/mnote/bin/pip install --no-cache-dir --disable-pip-version-check --quiet '/src[postgres,otel]' \
    && rm -rf /src

# An unprivileged user whose home holds the embedded store's default path and a generated token, and
# /etc/mnote for the tokens file (a volume mounted there starts owned by that user: compose's tokens).
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/mnote --create-home mnote \
    && install -d -o 10001 -g 10001 -m 0700 /etc/mnote
USER 10001:10001
ENV PATH=/opt/mnote/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    MNOTE_LOG_FORMAT=json
WORKDIR /var/lib/mnote
EXPOSE 8765
ENTRYPOINT ["mnote-mcp"]
