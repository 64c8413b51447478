"""Reliability answers: pair verdicts and sample-size plans, paired outcomes, MDAD analyses
(request side, job side, stored codecs) and their plots. Imports selection, catalog and platform.
"""
