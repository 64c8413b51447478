"""Reliability of micro-benchmarks: the paper's protocol and what it measures.

The protocol in runs (:mod:`.protocol`, chunked in :mod:`.analysis`), agreement with the full
benchmark (:mod:`.agreement`), MDAD (:mod:`.mdad`), exact order probabilities for random subsets
(:mod:`.exact`), verdicts and sample-size plans (:mod:`.planning`, :mod:`.power`). A new
reliability measure goes here.
"""
