"""Platform services shared by every domain: bounded caches (bytes measured in :mod:`.sizing`, single
flight), Idempotency-Key replay, keyset pagination, readiness, jobs with their quotas (:mod:`.quotas`,
charged to the request's :mod:`.caller`), the built-in ping job, spreadsheet-safe export cells.
Imports no other room.
"""
