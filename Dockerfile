# render-service: the CPU tier of disaggregated LLM serving (render / derender).
# Multi-stage: build a wheel with its dependencies, then install into a slim runtime as non-root.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY render_service ./render_service
COPY parsers ./parsers
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-compile .

FROM python:3.11-slim AS runtime
LABEL org.opencontainers.image.title="render-service" \
      org.opencontainers.image.description="Stateless render/derender tier (OpenAI <-> token ids)" \
      org.opencontainers.image.licenses="Apache-2.0"
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
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=2)"]
ENTRYPOINT ["render-service"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
