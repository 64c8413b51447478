"""Evaluation sessions: evaluate until decided.

Time-uniform confidence sequences for sampling without replacement (:mod:`.confidence_sequences`),
the model-based ``fluid`` item choice (:mod:`.fluid`) and the offline session simulator
(:mod:`.simulation`). A new session policy or confidence sequence goes here.
"""
