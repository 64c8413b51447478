"""Item-level diagnostics: item health statistics and flags (:mod:`.health`)."""
