"""Item response theory: the multidimensional 2PL fit (:mod:`.fit`) and the fitted model
(:mod:`.model`: prediction, ability scoring, person fit). Used by selectors, estimators, item health and
the ``fluid`` session policy.
"""
