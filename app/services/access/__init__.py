"""Access: who may do what. API keys and their per-project roles, projects, the checks every route
runs on the project that owns its target, the audit trail of writes, browser sessions.
Imports only :mod:`app.services.platform`.
"""
