# stackbot service image: `stackbot serve` (API, dashboard, webhook receiver).
# Debian bookworm's git is 2.39 (merge-tree --write-tree needs >= 2.38). Python 3.12, the
# version Megatron-LM needs: the allowlist scanner parses its files (PEP 701 f-strings) with the
# service's own Python, so no second interpreter (STACKBOT_SCANNER_PYTHON) is needed here.
FROM python:3.12-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    STACKBOT_DATA_DIR=/var/lib/stackbot

RUN apt-get update \
    && apt-get install -y --no-install-recommends git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && git --version

RUN useradd --system --create-home --home-dir /home/stackbot --uid 10001 stackbot \
    && mkdir -p /var/lib/stackbot && chown stackbot:stackbot /var/lib/stackbot

WORKDIR /app
COPY pyproject.toml README.md ./
COPY stackbot ./stackbot
COPY gpu_jobs ./gpu_jobs
COPY migrations ./migrations
# The service itself does not need torch: GPU nodes install gpu_jobs with the `gpu` extra.
RUN pip install .

USER stackbot
EXPOSE 8000
VOLUME ["/var/lib/stackbot"]

HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"

ENTRYPOINT ["stackbot"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000", "--worker"]
