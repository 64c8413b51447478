"""Ranking models: paired 2x2 counts and their tests for every pair (:mod:`.pairwise`) and
leaderboards with rank intervals and tiers (:mod:`.leaderboard`). A new ranking rule goes here.
"""
