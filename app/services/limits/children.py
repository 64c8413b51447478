"""Child processes for expensive computations: the API process's GIL stays with its requests.

A thread pool at a lower CPU priority still shares the process's GIL with the request threads,
so a cheap GET waited for the running computation's Python and numpy bookkeeping (719 ms p99
under 20 cache-busting clients). Here each computation runs in a child process of the API
process (``forkserver`` start: never a ``fork`` of the threaded server), one computation per
child at a time, the child at ``nice`` ``EXPENSIVE_NICE``.

What crosses the pipe: a module-level function (importable in the child: a pure ``app.core``
function or a small wrapper) and plain arguments (numpy arrays, numbers, strings). A large input
that repeats from call to call (a version's matrix) is wrapped in :class:`Shared`: it is sent to
a child once and kept there under its key (version id and results stamp), ``HELD`` of them per
child, least recently used dropped first; the parent mirrors what each child holds, so it knows
without asking whether to send the array again.

A child that dies (killed, out of memory) or exceeds its time limit is killed and replaced by a
fresh one on the next call; the caller gets :class:`ChildFailed` (the pool answers 503 with
``Retry-After``), never a hung request.
"""

from __future__ import annotations

import copyreg
import multiprocessing
import os
import pickle
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any


# Frozen dataclasses of app.core hold their mappings as MappingProxyType, which pickle refuses:
# they cross the pipe as the plain dict they wrap and come back read-only.
def read_only(d: dict) -> MappingProxyType:
    return MappingProxyType(d)


copyreg.pickle(MappingProxyType, lambda m: (read_only, (dict(m),)))

HELD = 2  # large inputs kept per child (the matrices of the last two versions or stamps)
PRELOAD = ["numpy", "scipy.stats", "app.core.reliability.exact", "app.core.ranking.leaderboard"]


@dataclass(frozen=True)
class Shared:
    """A large argument named by ``key`` (e.g. ``(version_id, results_stamp)``): sent to a child
    only when it does not hold it yet. Equal keys must mean equal values."""

    key: Hashable
    value: Any


@dataclass(frozen=True)
class _Ref:
    key: Hashable


class ChildFailed(Exception):
    """The child died or ran past its time limit (it has been killed)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason  # "died" or "timeout"


def _remember(held: OrderedDict, keys: Iterable[Hashable], values: dict) -> None:
    """The same bookkeeping in parent (values None) and child: the keys of this call become
    the most recent; beyond ``HELD``, the least recently used are dropped."""
    for key in keys:
        if key in values:
            value = values[key]
            if hasattr(value, "setflags"):  # a kept array is read-only: no call can change it
                value.setflags(write=False)
            held[key] = value
        held.move_to_end(key)
    while len(held) > HELD:
        held.popitem(last=False)


def _split(args: tuple, kwargs: dict) -> tuple[tuple, dict, dict[Hashable, Any]]:
    """Arguments with every :class:`Shared` replaced by a reference, and the shared values."""
    shared: dict[Hashable, Any] = {}

    def ref(a: Any) -> Any:
        if isinstance(a, Shared):
            shared[a.key] = a.value
            return _Ref(a.key)
        return a

    return tuple(map(ref, args)), {k: ref(v) for k, v in kwargs.items()}, shared


def unwrap(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The plain arguments (for running the function in this process)."""
    plain = [a.value if isinstance(a, Shared) else a for a in args]
    return tuple(plain), {k: v.value if isinstance(v, Shared) else v for k, v in kwargs.items()}


def _safe_error(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling, else a RuntimeError that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _child_main(conn: Any, nice: int, idle: bool) -> None:  # pragma: no cover - in the child
    try:
        os.nice(nice)
    except OSError:  # not allowed: run at the parent's priority
        pass
    if idle:
        # SCHED_IDLE (Linux): run only when no ordinary task wants the CPU, and give it up as
        # soon as one wakes; nice 19 still takes a share, and a request thread woken behind a
        # computing child waited for it (bench/bench_fair_load.py)
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):
            pass
    held: OrderedDict = OrderedDict()
    while True:
        try:
            fn, args, kwargs, keys, sent = conn.recv()
        except (EOFError, OSError):
            return
        try:
            _remember(held, keys, sent)

            def value(a: Any) -> Any:
                return held[a.key] if isinstance(a, _Ref) else a

            result = ("ok", fn(*map(value, args), **{k: value(v) for k, v in kwargs.items()}))
        except BaseException as exc:
            result = ("error", _safe_error(exc))
        try:
            conn.send(result)
        except Exception as exc:  # an unpicklable result
            conn.send(("error", RuntimeError(f"result not sendable: {exc}")))


def _context() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


class Child:
    """One child process and the pipe to it; one call at a time."""

    def __init__(self, nice: int, idle: bool = False) -> None:
        ctx = _context()
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(
            target=_child_main,
            args=(theirs, nice, idle),
            name="benchslice-expensive",
            daemon=True,
        )
        self.proc.start()
        theirs.close()
        self.held: OrderedDict = OrderedDict()  # mirror of the child's shared inputs

    @property
    def pid(self) -> int | None:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.is_alive()

    def call(self, fn: Callable[..., Any], args: tuple, kwargs: dict, timeout: float) -> Any:
        """``fn(*args, **kwargs)`` in the child; raises what it raised, or :class:`ChildFailed`
        (after killing it) when it dies or runs past ``timeout`` seconds."""
        args, kwargs, shared = _split(args, kwargs)
        sent = {k: v for k, v in shared.items() if k not in self.held}
        try:
            self.conn.send((fn, args, kwargs, list(shared), sent))
            _remember(self.held, shared, dict.fromkeys(sent))
            if not self.conn.poll(timeout):
                self.kill()
                raise ChildFailed("timeout", f"the computation ran past {timeout:g} s")
            status, value = self.conn.recv()
        except (EOFError, OSError, BrokenPipeError) as exc:
            self.kill()
            raise ChildFailed("died", f"the computing process ended ({exc!r})") from exc
        if status == "error":
            raise value
        return value

    def kill(self) -> None:
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(5)
        self.conn.close()
