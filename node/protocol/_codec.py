"""The reference codec: a declared struct, at one version, as a chain of per-field step closures.

Building the chain resolves everything that depends on the version once: which fields are on the
wire, nullability, classic or compact encodings, tagged fields, defaults of absent fields. Runs of
consecutive fixed-size fields share one precompiled ``struct.Struct``. This codec defines the
semantics and produces the precise errors (field path, byte offset, bad value); ``_generate``
derives a faster straight-line function from the same plan and falls back to this one to explain
any failure.

Decoded structs carry every declared field (absent ones hold their defaults). Encoding accepts a
``Struct`` or a mapping at every level; missing fields take their defaults, fields not in the
version are skipped, names the struct does not declare at all are an error (a typo would otherwise
silently send a default).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._errors import DecodeFailure, EncodeFailure
from ._schema import BYTES, RECORDS, STRING, UUID, ArrayOf, Field, Primitive, StructDef
from ._struct import Struct
from ._types import (
    I32,
    Out,
    Reader,
    Writer,
    bytes_reader,
    bytes_writer,
    check_span,
    read_length,
    read_uuid,
    read_uvarint,
    records_writer,
    string_reader,
    string_writer,
    write_length32,
    write_uuid,
    write_uvarint,
)

ReadStep = Callable[[memoryview, int, dict[str, Any]], int]
_new_object = object.__new__  # a Struct without running __init__; readers fill its __dict__ directly
WriteStep = Callable[[Out, Mapping[str, Any]], None]


@dataclass(frozen=True, slots=True)
class Codec:
    """A compiled struct: ``read(buf, pos) -> (Struct, pos)`` and ``write(out, value)``."""

    read: Reader
    write: Writer


def on_wire(f: Field, version: int, flexible: bool) -> bool:
    return version in f.versions and (f.tag is None or flexible)


def groups(fields: list[Field]) -> list[list[Field]]:
    """Split untagged wire fields into runs: consecutive fixed-size primitives share one run."""
    runs: list[list[Field]] = []
    for f in fields:
        fixed = isinstance(f.type, Primitive) and f.type.fixed is not None
        if fixed and runs and is_fixed_run(runs[-1]):
            runs[-1].append(f)
        else:
            runs.append([f])
    return runs


def is_fixed_run(run: list[Field]) -> bool:
    first = run[0].type
    return isinstance(first, Primitive) and first.fixed is not None


def run_struct(run: list[Field]) -> struct.Struct:
    return struct.Struct(">" + "".join(f.type.fixed for f in run if isinstance(f.type, Primitive) and f.type.fixed))


# ---------------------------------------------------------------------------------------------------------------------
# reading


@dataclass(frozen=True, slots=True)
class _ReadPlan:
    """What reading one struct at one version involves, worked out once."""

    steps: tuple[ReadStep, ...]
    # step -> (field, offset in run, size) of the fields it reads, to name the field in errors
    explain: dict[ReadStep, list[tuple[str, int, int]]]
    # fills the fields absent from the wire (and unset tagged fields) with their defaults; None if there are none
    fill: Callable[[dict[str, Any]], None] | None


def _read_plan(sdef: StructDef, version: int, flexible: bool) -> _ReadPlan:
    wire = [f for f in sdef.fields if on_wire(f, version, flexible)]
    untagged = [f for f in wire if f.tag is None]
    tagged = [f for f in wire if f.tag is not None]
    absent = [f for f in sdef.fields if f not in wire]

    steps: list[ReadStep] = []
    explain: dict[ReadStep, list[tuple[str, int, int]]] = {_read_nothing: [("<struct>", 0, 0)]}
    for run in groups(untagged):
        if is_fixed_run(run):
            st = run_struct(run)
            step = _fixed_run_step(tuple(f.name for f in run), st)
            layout, offset = [], 0
            for f in run:
                size = struct.calcsize(">" + str(f.type.fixed if isinstance(f.type, Primitive) else ""))
                layout.append((f.name, offset, size))
                offset += size
            explain[step] = layout
        else:
            f = run[0]
            step = _field_step(f.name, field_reader(f, version, flexible))
            explain[step] = [(f.name, 0, 0)]
        steps.append(step)
    if flexible:
        tag_step = tags_reader_step(
            {f.tag: (f.name, field_reader(f, version, flexible)) for f in tagged if f.tag is not None}
        )
        steps.append(tag_step)
        explain[tag_step] = [("<tagged fields>", 0, 0)]
    return _ReadPlan(tuple(steps), explain, filler(absent, tagged))


def filler(absent: list[Field], tagged: list[Field]) -> Callable[[dict[str, Any]], None] | None:
    """A function that gives absent fields (and tagged fields not on the wire) their defaults; None if none."""
    static_defaults = {f.name: f.default for f in absent if not f.is_array() or f.default is None}
    list_defaults = tuple(f.name for f in absent if f.is_array() and f.default is not None)
    tagged_defaults = tuple((f.name, f) for f in tagged)
    if not (static_defaults or list_defaults or tagged_defaults):
        return None

    def fill(d: dict[str, Any]) -> None:
        d.update(static_defaults)
        for name in list_defaults:
            d[name] = []
        for name, f in tagged_defaults:
            if name not in d:
                d[name] = f.fresh_default()

    return fill


def reference_reader(sdef: StructDef, version: int, flexible: bool) -> Reader:
    """Read one struct: ``read(buf, pos) -> (Struct, pos)``; raises DecodeFailure naming the field path."""
    plan = _read_plan(sdef, version, flexible)
    all_steps, explain, fill = plan.steps, plan.explain, plan.fill

    def read_struct(buf: memoryview, pos: int) -> tuple[Struct, int]:
        obj = _new_object(Struct)
        d: dict[str, Any] = obj.__dict__  # the steps fill the Struct's attribute dict in place
        step: ReadStep = _read_nothing
        try:
            for step in all_steps:
                pos = step(buf, pos, d)
        except DecodeFailure as exc:
            exc.path.insert(0, "." + explain[step][0][0])
            raise
        except (struct.error, IndexError):
            raise _truncated(buf, pos, explain[step]) from None
        except UnicodeDecodeError as exc:
            failure = DecodeFailure(f"invalid UTF-8 ({exc.reason} at string byte {exc.start})", pos)
            failure.path.insert(0, "." + explain[step][0][0])
            raise failure from None
        if fill is not None:
            fill(d)
        return obj, pos

    return read_struct


def _read_nothing(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
    return pos


def _truncated(buf: memoryview, pos: int, layout: list[tuple[str, int, int]]) -> DecodeFailure:
    """The failure for a frame that ends inside a step: names the first field of the run that overruns."""
    name, offset, size = next(((n, o, s) for n, o, s in layout if pos + o + s > len(buf)), layout[0])
    at = pos + offset
    left = max(len(buf) - at, 0)
    need = f"needs {size} bytes, {left} left" if size else f"frame length {len(buf)}"
    failure = DecodeFailure(f"the frame ends inside this field ({need})", at)
    failure.path.insert(0, "." + name)
    return failure


def _fixed_run_step(names: tuple[str, ...], st: struct.Struct) -> ReadStep:
    unpack_from = st.unpack_from
    size = st.size
    if len(names) == 1:
        (name,) = names

        def read_one(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
            (d[name],) = unpack_from(buf, pos)
            return pos + size

        return read_one

    def read_run(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
        d.update(zip(names, unpack_from(buf, pos), strict=True))
        return pos + size

    return read_run


def _field_step(name: str, reader: Reader) -> ReadStep:
    def read_field(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
        d[name], pos = reader(buf, pos)
        return pos

    return read_field


def tags_reader_step(known: dict[int, tuple[str, Reader]]) -> ReadStep:
    def read_tags(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
        count, pos = read_uvarint(buf, pos)
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            end = check_span(buf, pos, size, f"tagged field {tag}")
            entry = known.get(tag)
            if entry is not None:  # unknown tags are skipped
                name, reader = entry
                value, used = reader(buf[:end], pos)
                if used != end:
                    raise DecodeFailure(f"tagged field {name} (tag {tag}) is {size} bytes, its value {used - pos}", pos)
                d[name] = value
            pos = end
        return pos

    return read_tags


def field_reader(f: Field, version: int, flexible: bool) -> Reader:
    nullable = version in f.nullable
    t = f.type
    if isinstance(t, ArrayOf):
        return _array_reader(t, version, flexible, nullable)
    if isinstance(t, StructDef):
        return reference_reader(t, version, flexible)
    return primitive_reader(t, flexible, nullable)


def primitive_reader(t: Primitive, compact: bool, nullable: bool) -> Reader:
    if t.fixed is not None:
        st = struct.Struct(">" + t.fixed)
        unpack_from, size = st.unpack_from, st.size

        def read_fixed(buf: memoryview, pos: int) -> tuple[Any, int]:
            return unpack_from(buf, pos)[0], pos + size

        return read_fixed
    if t is STRING:
        return string_reader(compact=compact, nullable=nullable)
    if t is BYTES:
        return bytes_reader(compact=compact, nullable=nullable, zero_copy=False)
    if t is RECORDS:
        return bytes_reader(compact=compact, nullable=nullable, zero_copy=True)
    if t is UUID:
        return read_uuid
    raise ValueError(f"no reader for type {t!r}")


def _array_reader(t: ArrayOf, version: int, compact: bool, nullable: bool) -> Reader:
    item = t.item
    if isinstance(item, Primitive) and item.fixed is not None:
        code, size = item.fixed, struct.calcsize(">" + item.fixed)

        def read_fixed_array(buf: memoryview, pos: int) -> tuple[list[Any] | None, int]:
            n, pos = _array_length(buf, pos, compact, nullable)
            if n < 0:
                return None, pos
            end = check_span(buf, pos, n * size, f"array of {n} {item.name}")
            return list(struct.unpack_from(f">{n}{code}", buf, pos)), end

        return read_fixed_array

    read_item = (
        reference_reader(item, version, compact)
        if isinstance(item, StructDef)
        else primitive_reader(item, compact, nullable=False)
    )

    def read_array(buf: memoryview, pos: int) -> tuple[list[Any] | None, int]:
        n, pos = _array_length(buf, pos, compact, nullable)
        if n < 0:
            return None, pos
        items: list[Any] = []
        append = items.append
        try:
            for _ in range(n):
                value, pos = read_item(buf, pos)
                append(value)
        except DecodeFailure as exc:
            exc.path.insert(0, f"[{len(items)}]")
            raise
        except (struct.error, IndexError):
            failure = DecodeFailure(f"the frame ends inside this item (frame length {len(buf)})", pos)
            failure.path.insert(0, f"[{len(items)}]")
            raise failure from None
        return items, pos

    return read_array


def _array_length(buf: memoryview, pos: int, compact: bool, nullable: bool) -> tuple[int, int]:
    """The item count (-1 for a null array); rejects negative counts and counts the frame cannot hold."""
    start = pos
    n, pos = read_length(buf, pos, compact, I32)
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        why = "null not allowed" if n == -1 else "negative"
        raise DecodeFailure(f"array length {n} is invalid here ({why})", start)
    if n > len(buf) - pos:
        raise DecodeFailure(f"array length {n} exceeds the {len(buf) - pos} bytes left in the frame", start)
    return n, pos


# ---------------------------------------------------------------------------------------------------------------------
# writing


def reference_writer(sdef: StructDef, version: int, flexible: bool) -> Writer:
    """Write one struct from a Struct or mapping; raises EncodeFailure naming the field path and value."""
    known = frozenset(sdef.field_names())
    wire = [f for f in sdef.fields if on_wire(f, version, flexible)]
    untagged = [f for f in wire if f.tag is None]
    tagged = sorted((f for f in wire if f.tag is not None), key=lambda f: f.tag or 0)

    steps: list[WriteStep] = []
    explain: dict[WriteStep, list[Field]] = {_write_nothing: []}
    for run in groups(untagged):
        if is_fixed_run(run):
            step = _fixed_run_write(run)
        else:
            step = _field_write(run[0], field_writer(run[0], version, flexible))
        explain[step] = run
        steps.append(step)
    if flexible:
        step = tags_writer_step([(f, field_writer(f, version, flexible)) for f in tagged])
        explain[step] = []  # the tag writer names its fields itself
        steps.append(step)
    all_steps = tuple(steps)

    def write_struct(out: Out, value: Any) -> None:
        kind = type(value)
        if kind is dict:
            d: Mapping[str, Any] = value
        elif kind is Struct or isinstance(value, Struct):
            d = value.__dict__
        elif isinstance(value, Mapping):
            d = value
        else:
            raise EncodeFailure(f"expected a Struct or a mapping, got {type(value).__name__} {value!r:.80}")
        if not known.issuperset(d):
            unknown = ", ".join(sorted(str(k) for k in d if k not in known))
            raise EncodeFailure(f"unknown field(s) {unknown}; declared: {', '.join(sdef.field_names())}")
        step: WriteStep = _write_nothing
        try:
            for step in all_steps:
                step(out, d)
        except EncodeFailure as exc:
            if len(explain[step]) == 1:
                exc.path.insert(0, "." + explain[step][0].name)
            raise
        except struct.error:
            raise _bad_fixed_value(explain[step], d) from None

    return write_struct


def _write_nothing(out: Out, d: Mapping[str, Any]) -> None:
    return None


def _bad_fixed_value(run: list[Field], d: Mapping[str, Any]) -> EncodeFailure:
    """Find which field of a fixed run did not pack, and say why."""
    for f in run:
        value = d.get(f.name, f.default)
        assert isinstance(f.type, Primitive) and f.type.fixed is not None
        try:
            struct.pack(">" + f.type.fixed, value)
        except struct.error as exc:
            failure = EncodeFailure(f"{value!r:.80} is not a valid {f.type.name} ({exc})")
            failure.path.insert(0, "." + f.name)
            return failure
    return EncodeFailure(f"values {[d.get(f.name, f.default) for f in run]!r:.120} do not pack")  # pragma: no cover


def _fixed_run_write(run: list[Field]) -> WriteStep:
    pack = run_struct(run).pack
    names = tuple(f.name for f in run)
    defaults = tuple(f.default for f in run)

    def write_run(out: Out, d: Mapping[str, Any]) -> None:
        out.buf += pack(*map(d.get, names, defaults))

    return write_run


def _field_write(f: Field, writer: Writer) -> WriteStep:
    name, default = f.name, f.default

    def write_field(out: Out, d: Mapping[str, Any]) -> None:
        writer(out, d.get(name, default))

    return write_field


def _is_default(f: Field, value: Any) -> bool:
    if isinstance(f.type, ArrayOf) and value is not None and f.default is not None:
        return len(value) == len(f.default) and list(value) == list(f.default)
    return bool(value == f.default)


def tags_writer_step(tagged: list[tuple[Field, Writer]]) -> WriteStep:
    if not tagged:

        def write_no_tags(out: Out, d: Mapping[str, Any]) -> None:
            out.buf += b"\x00"

        return write_no_tags

    def write_tags(out: Out, d: Mapping[str, Any]) -> None:
        present = [(f, w, d[f.name]) for f, w in tagged if f.name in d and not _is_default(f, d[f.name])]
        write_uvarint(out, len(present))
        for f, writer, value in present:
            tmp = Out()
            try:
                writer(tmp, value)
            except EncodeFailure as exc:
                exc.path.insert(0, "." + f.name)
                raise
            if tmp.parts:
                raise EncodeFailure(f"tagged field {f.name} cannot hold file regions")
            write_uvarint(out, f.tag or 0)
            write_uvarint(out, len(tmp.buf))
            out.buf += tmp.buf

    return write_tags


def field_writer(f: Field, version: int, flexible: bool) -> Writer:
    nullable = version in f.nullable
    t = f.type
    if isinstance(t, ArrayOf):
        return _array_writer(t, version, flexible, nullable)
    if isinstance(t, StructDef):
        return reference_writer(t, version, flexible)
    return primitive_writer(t, flexible, nullable)


def primitive_writer(t: Primitive, compact: bool, nullable: bool) -> Writer:
    if t.fixed is not None:
        pack = struct.Struct(">" + t.fixed).pack
        name = t.name

        def write_fixed(out: Out, value: Any) -> None:
            try:
                out.buf += pack(value)
            except struct.error as exc:
                raise EncodeFailure(f"{value!r:.80} is not a valid {name} ({exc})") from None

        return write_fixed
    if t is STRING:
        return string_writer(compact=compact, nullable=nullable)
    if t is BYTES:
        return bytes_writer(compact=compact, nullable=nullable)
    if t is RECORDS:
        return records_writer(compact=compact, nullable=nullable)
    if t is UUID:
        return write_uuid
    raise ValueError(f"no writer for type {t!r}")


def _array_writer(t: ArrayOf, version: int, compact: bool, nullable: bool) -> Writer:
    item = t.item
    fixed_code = item.fixed if isinstance(item, Primitive) else None
    write_item = (
        reference_writer(item, version, compact)
        if isinstance(item, StructDef)
        else primitive_writer(item, compact, nullable=False)
    )

    def write_array(out: Out, value: Any) -> None:
        if value is None:
            if not nullable:
                raise EncodeFailure("None for a non-nullable array")
            out.buf += b"\x00" if compact else b"\xff\xff\xff\xff"
            return
        if not isinstance(value, (list, tuple)):
            raise EncodeFailure(f"expected a list, got {type(value).__name__} {value!r:.80}")
        write_length32(out, len(value), compact)
        if fixed_code is not None:
            try:
                out.buf += struct.pack(f">{len(value)}{fixed_code}", *value)
                return
            except struct.error:
                pass  # fall through to the per-item writer, which names the bad item
        for i, element in enumerate(value):
            try:
                write_item(out, element)
            except EncodeFailure as exc:
                exc.path.insert(0, f"[{i}]")
                raise

    return write_array
