"""Parsers for evaluation logs other tools write (Inspect AI ``.eval`` / JSON logs), and the
bounded archive reader they share. Pure: no server imports."""
