# deerflow-ext Gateway image: `docker build -t deerflow-ext .` then `docker compose up`
# (compose.yaml: the Gateway on PostgreSQL, with Redis). Extensions are Python packages:
# build a derived image that pip-installs them, and mount a config.yaml that enables them.
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    DEERFLOW_HOME=/var/lib/deerflow \
    DEERFLOW_CONFIG=/etc/deerflow/config.yaml \
    DEERFLOW_DATABASE_URL=sqlite+aiosqlite:////var/lib/deerflow/deerflow.db \
    DEERFLOW_HOST=0.0.0.0 \
    DEERFLOW_PORT=8001 \
    DEERFLOW_LOG_FORMAT=json
# The source stays in the image: the host names its contract distribution by a direct
# reference to contract/ (pyproject.toml), which pip builds from here, as `pip install .` does.
WORKDIR /opt/deerflow-ext
COPY pyproject.toml README.md ./
COPY contract ./contract
COPY src ./src
# [openai]: langchain-openai, so `use: langchain_openai:ChatOpenAI` works out of the box.
RUN pip install --no-cache-dir ".[openai]" \
    && useradd --system --uid 10001 --home-dir /var/lib/deerflow deerflow \
    && mkdir -p /var/lib/deerflow /etc/deerflow \
    && chown deerflow /var/lib/deerflow
COPY config.example.yaml /etc/deerflow/config.example.yaml
COPY docker/entrypoint.sh /usr/local/bin/deerflow-entrypoint
USER deerflow
WORKDIR /var/lib/deerflow
VOLUME ["/var/lib/deerflow"]
EXPOSE 8001
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8001/health', timeout=2)"
ENTRYPOINT ["deerflow-entrypoint"]
CMD ["serve"]
