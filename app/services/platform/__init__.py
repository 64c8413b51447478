"""Platform services shared by every domain: bounded caches, Idempotency-Key replay, keyset
pagination, API keys, readiness, jobs and the built-in ping job. Imports no domain room.
"""
