"""tau2 rewrites its whole results file after every simulation (`open("w")` then
`json.dump`). A kill during that write would cut the file short and lose every
finished simulation. Here, `tau2.run`'s writes go to a temporary file that
replaces the target only once complete; reads are untouched.
"""

from __future__ import annotations

import builtins
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import tau2.run


@contextmanager
def atomic_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Iterator[Any]:
    """`open` whose writes land all at once (write, fsync, rename)."""
    if "w" not in mode:
        with builtins.open(file, mode, *args, **kwargs) as handle:
            yield handle
        return
    target = Path(file)
    partial = target.with_name(f".{target.name}.partial")
    with builtins.open(partial, mode, *args, **kwargs) as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, target)


def install() -> None:
    """Shadow `open` in tau2.run's module globals only; nothing else changes."""
    tau2.run.open = atomic_open  # type: ignore[attr-defined]
