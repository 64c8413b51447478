# One image for the API, the worker and the one-shot migrate service.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/benchslice

# The package (app + worker) is installed; Alembic's files sit in the working directory,
# where `benchslice migrate` finds alembic.ini.
COPY pyproject.toml README.md ./
COPY app ./app
COPY worker ./worker
RUN pip install .

COPY alembic.ini ./
COPY migrations ./migrations

RUN useradd --create-home --uid 10001 benchslice && mkdir -p var && chown benchslice var
USER benchslice

ENV HOST=0.0.0.0 PORT=8000
EXPOSE 8000
CMD ["benchslice", "serve"]
