"""Evaluation sessions: evaluate a model in batches until its question is answered.
Imports selection, catalog and platform.
"""
