"""Benchmarks and their data: versions and references (``name@vN``), uploads and stored model
results, the full-coverage matrices every domain reads (:mod:`.matrices`), item health and the
stored IRT fit of a version. Imports only :mod:`app.services.platform`.
"""
