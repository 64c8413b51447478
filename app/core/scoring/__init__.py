"""Scoring a model known only on a subset: every estimate with an honest interval.

:mod:`.score_models` scores new models from their subset answers; :mod:`.reference` calibrates
against reference models known on every item (reference-calibrated and model-assisted intervals);
:mod:`.coverage` is the study that checks those intervals on held-out models. Builds on the
selectors and estimation rooms.
"""
