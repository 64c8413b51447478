"""Subsets and scoring: build, read and export subsets; score a model known only on a subset
(repeated samples, the drift guard). Imports catalog and platform.
"""
