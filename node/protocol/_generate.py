"""Generate a specialised reader and writer function per struct and version: the codec's fast path.

The step-based codec in ``_codec`` is the reference: it defines the semantics and produces the
precise error messages (field path, byte offset, bad value). Calling a closure per field costs
about 50 Python calls for a small Produce request, so for each (struct, version) this module emits
straight-line Python source instead (one function per struct: fixed-size runs unpacked with one
precompiled ``struct.Struct``, classic strings/bytes/records inlined, nested structs called) and
compiles it once with ``exec``. When a generated function meets anything unexpected it does not
report it itself: it re-runs the reference codec on the same input, which raises the precise error.
Both paths are tested to agree byte for byte.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from ._codec import (
    Codec,
    field_reader,
    field_writer,
    groups,
    is_fixed_run,
    on_wire,
    primitive_reader,
    primitive_writer,
    reference_reader,
    reference_writer,
    run_struct,
    tags_reader_step,
    tags_writer_step,
)
from ._schema import BYTES, RECORDS, STRING, ArrayOf, Field, Primitive, StructDef
from ._struct import Struct
from ._types import I16, I32, Out, Reader, Writer, read_uvarint, write_uvarint


def compile_struct(sdef: StructDef, version: int, flexible: bool) -> Codec:
    """Compile ``sdef`` for ``version``; ``flexible`` selects compact encodings and tag buffers."""
    return Codec(_generate_reader(sdef, version, flexible), _generate_writer(sdef, version, flexible))


class _Bad(Exception):
    """Raised inside generated code to hand over to the reference codec, which explains the problem."""


@dataclass
class _Source:
    """Lines of one generated function and the objects its code refers to by name."""

    lines: list[str]
    env: dict[str, Any]

    def bind(self, obj: Any, hint: str) -> str:
        name = f"{hint}_{len(self.env)}"
        self.env[name] = obj
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def build(self, name: str) -> Any:
        code = compile("\n".join(self.lines) + "\n", f"<strait.protocol {name}>", "exec")
        exec(code, self.env)
        return self.env[name]


def _base_env() -> dict[str, Any]:
    return {
        "Struct": Struct,
        "new": object.__new__,
        "_Bad": _Bad,
        "unpack_i16": I16.unpack_from,
        "unpack_i32": I32.unpack_from,
        "pack_i16": I16.pack,
        "pack_i32": I32.pack,
        "read_uvarint": read_uvarint,
        "write_uvarint": write_uvarint,
        "unpack_from": struct.unpack_from,
        "pack": struct.pack,
        "Out": Out,
    }


# ---------------------------------------------------------------------------------------------------------------------
# readers


def _generate_reader(sdef: StructDef, version: int, flexible: bool) -> Reader:
    src = _Source([], _base_env())
    wire = [f for f in sdef.fields if on_wire(f, version, flexible)]
    untagged = [f for f in wire if f.tag is None]
    tagged = [f for f in wire if f.tag is not None]
    absent = [f for f in sdef.fields if f not in wire]
    reference = src.bind(reference_reader(sdef, version, flexible), "reference")

    src.emit(0, "def read_struct(buf, pos):")
    src.emit(1, "start = pos")
    src.emit(1, "try:")
    src.emit(2, "size = len(buf)")
    src.emit(2, "obj = new(Struct)")
    src.emit(2, "d = obj.__dict__")
    for run in groups(untagged):
        if is_fixed_run(run):
            st = run_struct(run)
            targets = ", ".join(f'd["{f.name}"]' for f in run)
            src.emit(2, f"{targets}, = {src.bind(st.unpack_from, 'unpack')}(buf, pos)")
            src.emit(2, f"pos += {st.size}")
        else:
            _emit_read_field(src, run[0], version, flexible)
    if flexible:
        # Almost every tag buffer is empty (one zero byte): that case stays inline; a buffer that holds
        # fields (rare: a leader hint, a replica's state) goes to the reference step.
        step = tags_reader_step({f.tag: (f.name, field_reader(f, version, True)) for f in tagged if f.tag is not None})
        src.emit(2, "if buf[pos] == 0:")
        src.emit(3, "pos += 1")
        src.emit(2, "else:")
        src.emit(3, f"pos = {src.bind(step, 'tags')}(buf, pos, d)")
    _emit_defaults(src, 2, "d", absent, tagged, tags_read=flexible)
    src.emit(2, "return obj, pos")
    src.emit(1, "except Exception:")
    src.emit(2, f"return {reference}(buf, start)")
    reader: Reader = src.build("read_struct")
    return reader


def _emit_read_field(src: _Source, f: Field, version: int, flexible: bool) -> None:
    target = f'd["{f.name}"]'
    nullable = version in f.nullable
    t = f.type
    if isinstance(t, ArrayOf):
        _emit_read_array(src, f, t, version, flexible, nullable)
    elif t in (STRING, BYTES, RECORDS):
        width = "i16" if t is STRING else "i32"
        _emit_length(src, 2, flexible, width)
        _emit_null_check(src, target, nullable)
        src.emit(2, "else:")
        src.emit(3, "end = pos + n")
        src.emit(3, "if end > size:")
        src.emit(4, "raise _Bad")
        value = {STRING: 'str(buf[pos:end], "utf-8")', BYTES: "bytes(buf[pos:end])", RECORDS: "buf[pos:end]"}[t]
        src.emit(3, f"{target} = {value}")
        src.emit(3, "pos = end")
    else:  # uuid and other fixed types outside a run
        src.emit(2, f"{target}, pos = {src.bind(field_reader(f, version, flexible), 'read')}(buf, pos)")


def _emit_defaults(
    src: _Source, depth: int, d: str, absent: list[Field], tagged: list[Field], *, tags_read: bool
) -> None:
    """Emit what ``_codec.filler`` does, inline (a call per decoded struct measurably slowed Fetch): the
    fields absent from the wire take their defaults, a new list for an array; a tagged field the
    tag buffer did not set (``tags_read``) too."""
    for f in absent:
        value = "[]" if f.is_array() and f.default is not None else src.bind(f.default, "default")
        src.emit(depth, f'{d}["{f.name}"] = {value}')
    for f in tagged:
        value = "[]" if f.is_array() and f.default is not None else src.bind(f.default, "default")
        if tags_read:
            src.emit(depth, f'if "{f.name}" not in {d}:')
            src.emit(depth + 1, f'{d}["{f.name}"] = {value}')
        else:
            src.emit(depth, f'{d}["{f.name}"] = {value}')


def _emit_null_check(src: _Source, target: str, nullable: bool) -> None:
    """Emit the ``if n < 0:`` branch: -1 is null where the version allows it, anything else is malformed."""
    src.emit(2, "if n < 0:")
    if nullable:
        src.emit(3, "if n != -1:")
        src.emit(4, "raise _Bad")
        src.emit(3, f"{target} = None")
    else:
        src.emit(3, "raise _Bad")


def _emit_length(src: _Source, depth: int, compact: bool, width: str) -> None:
    """Emit code that sets ``n`` to the length prefix (-1 for null) and advances ``pos``."""
    if compact:  # an unsigned varint, inline for the one-byte case (lengths below 127)
        src.emit(depth, "n = buf[pos]")
        src.emit(depth, "if n < 0x80:")
        src.emit(depth + 1, "pos += 1")
        src.emit(depth, "else:")
        src.emit(depth + 1, "n, pos = read_uvarint(buf, pos)")
        src.emit(depth, "n -= 1")
    else:
        src.emit(depth, f"n = unpack_{width}(buf, pos)[0]")
        src.emit(depth, f"pos += {2 if width == 'i16' else 4}")


def _emit_read_array(src: _Source, f: Field, t: ArrayOf, version: int, flexible: bool, nullable: bool) -> None:
    target = f'd["{f.name}"]'
    _emit_length(src, 2, flexible, "i32")
    _emit_null_check(src, target, nullable)
    src.emit(2, "elif n > size - pos:")
    src.emit(3, "raise _Bad")
    src.emit(2, "else:")
    item = t.item
    if isinstance(item, Primitive) and item.fixed is not None:
        item_size = struct.calcsize(">" + item.fixed)
        src.emit(3, f'{target} = list(unpack_from(f">{{n}}{item.fixed}", buf, pos))')
        src.emit(3, f"pos += n * {item_size}")
        return
    flat = _flat_layout(item, version) if isinstance(item, StructDef) and not flexible else None
    if flat is not None:
        st, names, absent = flat
        src.emit(3, f"end = pos + n * {st.size}")
        src.emit(3, "if end > size:")
        src.emit(4, "raise _Bad")
        src.emit(3, "items = []")
        src.emit(3, "append = items.append")
        values = ", ".join(f"v{i}" for i in range(len(names)))
        src.emit(3, f"for {values}, in {src.bind(st.iter_unpack, 'iter_unpack')}(buf[pos:end]):")
        _emit_flat_item(src, 4, "item", names, absent)
        src.emit(4, "append(item)")
        src.emit(3, f"{target} = items")
        src.emit(3, "pos = end")
        return
    read_item = (
        _generate_reader(item, version, flexible)
        if isinstance(item, StructDef)
        else primitive_reader(item, flexible, nullable=False)
    )
    flat = _flat_layout(item, version) if isinstance(item, StructDef) and flexible else None
    src.emit(3, "items = []")
    src.emit(3, "append = items.append")
    src.emit(3, "for _ in range(n):")
    if flat is not None:
        # a flexible struct of fixed-size fields: inline while its tag buffer is empty (one zero byte)
        st, names, absent = flat
        src.emit(4, f"if buf[pos + {st.size}] == 0:")
        values = ", ".join(f"v{i}" for i in range(len(names)))
        src.emit(5, f"{values}, = {src.bind(st.unpack_from, 'unpack')}(buf, pos)")
        src.emit(5, f"pos += {st.size + 1}")
        _emit_flat_item(src, 5, "value", names, absent)
        src.emit(4, "else:")
        src.emit(5, f"value, pos = {src.bind(read_item, 'read_item')}(buf, pos)")
    else:
        src.emit(4, f"value, pos = {src.bind(read_item, 'read_item')}(buf, pos)")
    src.emit(4, "append(value)")
    src.emit(3, f"{target} = items")


def _emit_flat_item(src: _Source, depth: int, var: str, names: tuple[str, ...], absent: list[Field]) -> None:
    """Emit a Struct ``var`` of the unpacked values ``v0``, ``v1``, ... (``names``) and the defaults of ``absent``."""
    src.emit(depth, f"{var} = new(Struct)")
    src.emit(depth, f"fields = {var}.__dict__")
    for i, name in enumerate(names):
        src.emit(depth, f'fields["{name}"] = v{i}')
    _emit_defaults(src, depth, "fields", absent, [], tags_read=False)


def _flat_layout(sdef: StructDef, version: int) -> tuple[struct.Struct, tuple[str, ...], list[Field]] | None:
    """For a struct whose untagged wire form is one fixed-size run: its Struct, names, and the fields
    that take their defaults. That is its whole classic form; its flexible form adds the tag buffer
    (when it is empty, its tagged fields take their defaults too)."""
    untagged = [f for f in sdef.fields if on_wire(f, version, False)]
    runs = groups(untagged)
    if len(runs) != 1 or not is_fixed_run(runs[0]):
        return None
    st = run_struct(runs[0])
    if st.size == 0:
        return None
    return st, tuple(f.name for f in runs[0]), [f for f in sdef.fields if f not in untagged]


# ---------------------------------------------------------------------------------------------------------------------
# writers


def _generate_writer(sdef: StructDef, version: int, flexible: bool) -> Writer:
    src = _Source([], _base_env())
    wire = [f for f in sdef.fields if on_wire(f, version, flexible)]
    untagged = [f for f in wire if f.tag is None]
    tagged = [f for f in wire if f.tag is not None]
    reference = src.bind(reference_writer(sdef, version, flexible), "reference")
    known = src.bind(frozenset(sdef.field_names()).issuperset, "known")

    src.emit(0, "def write_struct(out, value):")
    src.emit(1, "kind = type(value)")
    src.emit(1, "if kind is dict:")
    src.emit(2, "d = value")
    src.emit(1, "elif kind is Struct:")
    src.emit(2, "d = value.__dict__")
    src.emit(1, "else:")
    src.emit(2, f"return {reference}(out, value)")
    src.emit(1, f"if not {known}(d):")
    src.emit(2, f"return {reference}(out, value)")
    src.emit(1, "get = d.get")
    src.emit(1, "try:")
    src.emit(2, "buf = out.buf")
    for run in groups(untagged):
        if is_fixed_run(run):
            args = ", ".join(f'get("{f.name}", {src.bind(f.default, "default")})' for f in run)
            src.emit(2, f"buf += {src.bind(run_struct(run).pack, 'pack')}({args})")
        else:
            _emit_write_field(src, run[0], version, flexible)
    if flexible:
        _emit_write_tags(src, tagged, version)
    src.emit(1, "except Exception:")
    src.emit(2, f"{reference}(Out(), value)  # raises the precise EncodeFailure")
    src.emit(2, "raise")
    writer: Writer = src.build("write_struct")
    return writer


def _emit_write_field(src: _Source, f: Field, version: int, flexible: bool) -> None:
    default = src.bind(f.default, "default")
    general = src.bind(field_writer(f, version, flexible), "write")
    t = f.type
    src.emit(2, f'v = get("{f.name}", {default})')
    if isinstance(t, ArrayOf):
        item = t.item
        src.emit(2, "if type(v) is list or type(v) is tuple:")
        if flexible:
            src.emit(3, "n = len(v) + 1")
            src.emit(3, "if n < 0x80:")
            src.emit(4, "buf.append(n)")
            src.emit(3, "else:")
            src.emit(4, "write_uvarint(out, n)")
        else:
            src.emit(3, "buf += pack_i32(len(v))")
        if isinstance(item, StructDef):
            src.emit(3, f"write_item = {src.bind(_generate_writer(item, version, flexible), 'write_item')}")
            src.emit(3, "for element in v:")
            src.emit(4, "write_item(out, element)")
            src.emit(3, "buf = out.buf")
        elif isinstance(item, Primitive) and item.fixed is not None:
            src.emit(3, f'buf += pack(f">{{len(v)}}{item.fixed}", *v)')
        else:
            write_item = src.bind(primitive_writer(item, flexible, nullable=False), "write_item")
            src.emit(3, f"write_item = {write_item}")
            src.emit(3, "for element in v:")
            src.emit(4, "write_item(out, element)")
        src.emit(2, "else:")
        src.emit(3, f"{general}(out, v)  # None, or not a list: the general writer decides")
    elif t is STRING and not flexible:
        src.emit(2, "if type(v) is str:")
        src.emit(3, "data = v.encode()")
        src.emit(3, "if len(data) > 0x7FFF:")
        src.emit(4, "raise _Bad")
        src.emit(3, "buf += pack_i16(len(data))")
        src.emit(3, "buf += data")
        src.emit(2, "else:")
        src.emit(3, f"{general}(out, v)")
    elif t is STRING:  # compact: unsigned varint length + 1
        src.emit(2, "if type(v) is str:")
        src.emit(3, "data = v.encode()")
        src.emit(3, "write_uvarint(out, len(data) + 1)")
        src.emit(3, "buf += data")
        src.emit(2, "else:")
        src.emit(3, f"{general}(out, v)")
    elif t is BYTES and not flexible:
        src.emit(2, "if type(v) is bytes:")
        src.emit(3, "buf += pack_i32(len(v))")
        src.emit(3, "buf += v")
        src.emit(2, "else:")
        src.emit(3, f"{general}(out, v)")
    else:  # records (may add parts), compact strings/bytes, uuid
        src.emit(2, f"{general}(out, v)")
        src.emit(2, "buf = out.buf")


def _emit_write_tags(src: _Source, tagged: list[Field], version: int) -> None:
    """Emit the tag buffer: one zero byte inline when every tagged field is at its default (the usual
    case), else the reference step, which writes the fields that differ in tag order."""
    step = src.bind(
        tags_writer_step([(f, field_writer(f, version, True)) for f in sorted(tagged, key=lambda f: f.tag or 0)]),
        "tags",
    )
    if not tagged:
        src.emit(2, 'buf += b"\\x00"')
        return
    checks = []
    for f in tagged:
        if f.default is None:
            checks.append(f'get("{f.name}") is None')
        elif isinstance(f.type, ArrayOf):  # the reference writes any list or tuple that is not empty
            checks.append(f'not get("{f.name}", ()) and type(get("{f.name}", ())) in (list, tuple)')
        else:
            default = src.bind(f.default, "default")
            checks.append(f'get("{f.name}", {default}) == {default}')
    src.emit(2, f"if {' and '.join(checks)}:")
    src.emit(3, 'buf += b"\\x00"')
    src.emit(2, "else:")
    src.emit(3, f"{step}(out, d)")
