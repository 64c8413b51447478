"""Real processes for hardening tests: private Redis/Postgres, uvicorn, Celery workers."""
