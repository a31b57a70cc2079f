"""Struct: attribute access, conversion to plain dicts, equality, repr."""

from __future__ import annotations

import copy
import pickle

import pytest

from node.protocol import Struct


def test_attribute_access_and_unknown_field_message() -> None:
    s = Struct(error_code=3, topics=[])
    assert s.error_code == 3
    with pytest.raises(AttributeError, match=r"no field 'eror_code' \(fields: error_code, topics\)"):
        _ = s.eror_code
    assert not hasattr(s, "__deepcopy_magic__")


def test_to_dict_converts_nested_structs_lists_and_views() -> None:
    data = bytearray(b"records!")
    s = Struct(topics=[Struct(name="t", partitions=[Struct(index=0, records=memoryview(data)[:7])])], empty=None)
    assert s.to_dict() == {
        "topics": [{"name": "t", "partitions": [{"index": 0, "records": b"records"}]}],
        "empty": None,
    }


def test_equality_is_by_value() -> None:
    assert Struct(a=1, b=[Struct(c=2)]) == Struct(a=1, b=[Struct(c=2)])
    assert Struct(a=1) != Struct(a=2)
    assert Struct(a=1) != Struct(a=1, b=2)
    assert Struct(a=1) != {"a": 1}
    with pytest.raises(TypeError):
        hash(Struct(a=1))


def test_repr_shows_fields_and_abbreviates_views() -> None:
    s = Struct(name="t", records=memoryview(b"x" * 1000))
    assert repr(s) == "Struct(name='t', records=<1000 bytes>)"


def test_fields_can_be_set() -> None:
    s = Struct(a=1)
    s.a = 2
    s.b = 3
    assert s.to_dict() == {"a": 2, "b": 3}


def test_copy_and_pickle_keep_fields() -> None:
    s = Struct(a=1, nested=[Struct(b=b"x")])
    assert copy.deepcopy(s) == s
    assert pickle.loads(pickle.dumps(s)) == s
