"""Limits: no client can starve or bloat the service. Token-bucket rate limits, job and analysis
quotas, the bounded pool for expensive synchronous work, and the process-wide setup of all three.
Imports access and platform.
"""
