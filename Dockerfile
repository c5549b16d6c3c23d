# render-service: the CPU tier of disaggregated LLM serving (render / derender).
# Two stages: the build stage installs the locked dependencies (their own layer) and then the
# package into a venv, compiles bytecode and removes the build tools; the runtime stage copies the
# venv and runs it as a non-root user. Needs BuildKit (for the optional secret mounts):
#   DOCKER_BUILDKIT=1 docker build -t render-service .
# Behind a package mirror or a TLS-inspecting proxy, pass its index and CA bundle (never baked
# into a layer):
#   --build-arg PIP_INDEX_URL=https://mirror/simple
#   --secret id=pip_conf,src=pip.conf --secret id=ca_bundle,src=/etc/ssl/certs/ca-certificates.crt
# tools/docker_smoke.sh builds the image and runs the smoke test.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ARG PIP_INDEX_URL=""
ARG PIP_EXTRA_INDEX_URL=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore \
    PIP_INDEX_URL=${PIP_INDEX_URL} PIP_EXTRA_INDEX_URL=${PIP_EXTRA_INDEX_URL}
SHELL ["/bin/sh", "-eu", "-c"]
WORKDIR /src
RUN python -m venv /opt/venv
# Dependencies first, pinned with hashes: a code change does not reinstall them.
COPY requirements.lock ./
RUN --mount=type=secret,id=pip_conf,required=false \
    --mount=type=secret,id=ca_bundle,required=false \
    if [ -f /run/secrets/pip_conf ]; then export PIP_CONFIG_FILE=/run/secrets/pip_conf; fi; \
    if [ -f /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi; \
    /opt/venv/bin/pip install --require-hashes --no-deps --no-compile -r requirements.lock
COPY pyproject.toml README.md ./
COPY render_service ./render_service
COPY parsers ./parsers
# The package itself (no network: its build backend is in the lock), then bytecode for every
# module so workers do not compile at start, then no pip/setuptools/wheel in the runtime venv.
RUN /opt/venv/bin/pip install --no-deps --no-build-isolation --no-compile . \
    && /opt/venv/bin/pip uninstall --yes setuptools wheel \
    && /opt/venv/bin/python -m pip uninstall --yes pip \
    && /opt/venv/bin/python -m compileall -q -j 0 /opt/venv/lib

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="render-service" \
      org.opencontainers.image.description="Stateless render/derender tier (OpenAI <-> token ids)" \
      org.opencontainers.image.licenses="Apache-2.0"
# Host and port are settings like every other: RENDER_SERVICE_HOST / RENDER_SERVICE_PORT, or
# `serve --host/--port` (flags win); the health check probes whatever the server resolved.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_VERBOSITY=error \
    HF_HOME=/tmp/hf \
    RENDER_SERVICE_HOST=0.0.0.0 \
    RENDER_SERVICE_PORT=8000
RUN groupadd --system --gid 10001 render \
    && useradd --system --uid 10001 --gid render --no-create-home --shell /usr/sbin/nologin render
COPY --from=build /opt/venv /opt/venv
USER 10001:10001
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=4s --start-period=60s --retries=3 \
    CMD ["render-service", "health"]
ENTRYPOINT ["render-service"]
CMD ["serve"]
