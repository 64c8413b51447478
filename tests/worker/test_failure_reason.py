"""The reason recorded for a failed job names a time limit even when the limit interrupted a
database call and the cleanup raised something else on top of it."""

from __future__ import annotations

from billiard.exceptions import SoftTimeLimitExceeded

from worker.runner import failure_reason


def _raised_during(outer: Exception, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException:
            raise outer  # noqa: B904 — the implicit context is what the runner sees
    except BaseException as exc:
        return exc


def test_a_plain_error_is_named_with_its_text() -> None:
    assert failure_reason(ValueError("bad sizes")) == "ValueError: bad sizes"
    assert failure_reason(KeyError()) == "KeyError"


def test_a_time_limit_is_named() -> None:
    assert failure_reason(SoftTimeLimitExceeded()) == "time limit exceeded (SoftTimeLimitExceeded)"


def test_a_time_limit_under_a_cleanup_error_is_still_the_reason() -> None:
    exc = _raised_during(
        RuntimeError("another command is already in progress"), SoftTimeLimitExceeded()
    )
    assert exc.__context__ is not None
    assert failure_reason(exc) == "time limit exceeded (SoftTimeLimitExceeded)"


def test_an_error_under_an_unrelated_error_keeps_the_outer_reason() -> None:
    exc = _raised_during(RuntimeError("outer"), ValueError("inner"))
    assert failure_reason(exc) == "RuntimeError: outer"
