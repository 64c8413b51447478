"""Scalar closed-form oracles of the pairwise intervals (Wilson score, Newcombe method 10),
shared by the leaderboard and pairwise mutation tests."""

from __future__ import annotations

import math


def wilson(p, n, z):
    if math.isinf(n):
        return p, p
    den = 1 + z * z / n
    c = (p + z * z / (2 * n)) / den
    h = z / den * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, c - h), min(1.0, c + h)


def newcombe(a, b, c, d, factor, z):
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(p1, n * factor, z)
    l2, u2 = wilson(p2, n * factor, z)
    num = a * d - b * c
    if num > 0:
        num = max(num - n / 2, 0.0)
    den = (a + b) * (c + d) * (a + c) * (b + d)
    phi = num / math.sqrt(den) if den > 0 else 0.0
    delta = math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0))
    eps = math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0))
    diff = p1 - p2
    return diff, max(-1.0, diff - delta), min(1.0, diff + eps)
