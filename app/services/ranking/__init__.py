"""Leaderboards: tiers, rank intervals and the pairwise tests behind them.
Imports selection, catalog and platform.
"""
