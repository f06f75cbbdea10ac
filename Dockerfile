# daiku's service image: `python -m scheduler_svc` and `python -m actuator_svc`, and nothing a
# service does not import (no moto, no localcloud, no CLI, no test packages).
#   docker build -t daiku .                         # the service image (the last stage)
#   docker build --target localcloud -t daiku-localcloud .   # the local stack's cluster + EC2
# Reproducible from uv.lock: `uv sync --frozen` fails instead of resolving anew.
# PYTHON_IMAGE is any Debian-based image with python3 >= 3.11 on PATH; pin it by digest in
# release builds (python:3.11-slim-bookworm@sha256:...). `make image` passes a base that
# debootstrap built on this machine (deploy/image/bootstrap-base.sh).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS deps
# The uv version that wrote uv.lock, from PyPI, in its own venv (Debian's python3 refuses a
# system-wide pip install).
RUN python3 -m venv /opt/uv \
 && /opt/uv/bin/pip install --no-cache-dir --disable-pip-version-check --quiet "uv==0.13.9"
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/daiku
WORKDIR /src
# Dependencies first: this layer is rebuilt only when the lock changes. --no-default-groups
# leaves out the dev group (tests, linters) and the cli group (typer, moto).
COPY pyproject.toml uv.lock README.md ./
RUN /opt/uv/bin/uv sync --frozen --no-dev --no-default-groups --no-install-project

FROM deps AS build
# botocore carries the API models of every AWS service (27 MB of its 31); the actuator calls
# EC2, SQS and the Pricing API, and its credentials may come through STS (IRSA) or SSO.
RUN data="$(/opt/daiku/bin/python -c 'import botocore, os; print(os.path.dirname(botocore.__file__))')/data" \
 && find "$data" -mindepth 1 -maxdepth 1 -type d \
      ! -name ec2 ! -name sqs ! -name pricing ! -name sts ! -name sso ! -name sso-oidc \
      -exec rm -rf {} +
# numpy (HiGHS's arrays) ships its own test suites, 8 MB nothing here runs.
RUN site="$(/opt/daiku/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
 && find "$site/numpy" -type d -name tests -prune -exec rm -rf {} +
# The two services and the generated contract they share, as plain packages in site-packages
# (the project's wheel would also carry localcloud and the CLI).
COPY daiku ./daiku
COPY scheduler_svc ./scheduler_svc
COPY actuator_svc ./actuator_svc
RUN site="$(/opt/daiku/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
 && cp -r daiku scheduler_svc actuator_svc "$site" \
 && /opt/daiku/bin/python -m compileall -q "$site/daiku" "$site/scheduler_svc" "$site/actuator_svc"

# The local stack's localcloud (docker-compose.yml): the whole project with the cli extra (moto).
FROM deps AS localcloud-build
COPY daiku ./daiku
COPY scheduler_svc ./scheduler_svc
COPY actuator_svc ./actuator_svc
COPY localcloud ./localcloud
COPY daiku_cli ./daiku_cli
COPY deploy/crds ./deploy/crds
RUN /opt/uv/bin/uv sync --frozen --no-dev --no-default-groups --extra cli --no-editable

FROM ${PYTHON_IMAGE} AS runtime
RUN groupadd --system --gid 65532 daiku \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /tmp \
      --shell /usr/sbin/nologin daiku
# Everything is compiled at build time and nothing writes outside /tmp, so the root filesystem
# may be read-only (Kubernetes: readOnlyRootFilesystem with an emptyDir on /tmp).
ENV PATH=/opt/daiku/bin:$PATH \
    HOME=/tmp \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /tmp

FROM runtime AS localcloud
# localcloud writes its kubeconfig here; a named volume mounted on it inherits this owner.
RUN mkdir -p /var/run/localcloud && chown 65532:65532 /var/run/localcloud
COPY --from=localcloud-build /opt/daiku /opt/daiku
USER 65532:65532
CMD ["python", "-m", "localcloud", "--help"]

FROM runtime AS service
# The project's version (pyproject.toml); `make image` passes it and adds the git revision.
ARG DAIKU_VERSION=0.1.0
LABEL org.opencontainers.image.title="daiku" \
      org.opencontainers.image.description="daiku's scheduler (python -m scheduler_svc) and EC2 actuator (python -m actuator_svc)" \
      org.opencontainers.image.source="https://github.com/daiku-dev/daiku" \
      org.opencontainers.image.url="https://github.com/daiku-dev/daiku" \
      org.opencontainers.image.version="${DAIKU_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/daiku /opt/daiku
USER 65532:65532
CMD ["python", "-m", "scheduler_svc", "--help"]
