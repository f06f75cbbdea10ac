# One image for every daiku process:
#   python -m scheduler_svc | python -m actuator_svc | python -m localcloud | daiku ...
# Reproducible from uv.lock: `uv sync --frozen` fails instead of resolving anew.
# Pin the base by digest in release builds (python:3.11-slim-bookworm@sha256:...).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# The uv version that wrote uv.lock, from PyPI.
RUN pip install --no-cache-dir --disable-pip-version-check "uv==0.13.9"
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/daiku
WORKDIR /src
# Dependencies first: this layer is rebuilt only when the lock changes.
COPY pyproject.toml uv.lock README.md ./
RUN uv sync --frozen --no-dev --no-install-project
COPY daiku ./daiku
COPY daiku_cli ./daiku_cli
COPY scheduler_svc ./scheduler_svc
COPY actuator_svc ./actuator_svc
COPY localcloud ./localcloud
RUN uv sync --frozen --no-dev --no-editable

FROM ${PYTHON_IMAGE}
RUN groupadd --system --gid 65532 daiku \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin daiku
# localcloud writes its kubeconfig here; a named volume mounted on it inherits this owner.
RUN mkdir -p /var/run/localcloud && chown 65532:65532 /var/run/localcloud
COPY --from=build /opt/daiku /opt/daiku
# The CRDs and examples, for `daiku up` and for users of the image.
COPY deploy/crds /opt/daiku/share/crds
COPY deploy/examples /opt/daiku/share/examples
ENV PATH=/opt/daiku/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
WORKDIR /tmp
CMD ["daiku", "--help"]
