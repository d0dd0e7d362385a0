"""JSON-like values: what converts, what is refused, and how errors name the field."""

import collections
import enum
import math

import pytest

import memstrata


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        2**63 - 1,
        -(2**63),
        2**64 - 1,
        1.5,
        -0.25,
        1e300,
        "",
        "héllo ✓ 🚀",
        [],
        {},
        [1, "a", None, [2, [3, {"x": []}]]],
        {"a": {"b": {"c": [1, 2, {"d": None}]}}, "": "empty key", "with space": 1},
    ],
)
def test_roundtrip(mem, value):
    mem.short_term.store("v", value)
    got = mem.short_term.retrieve("v")
    assert got == value
    assert type(got) is type(value)


def test_bool_stays_bool_and_int_stays_int(mem):
    mem.short_term.store("v", [True, 1, 1.0])
    got = mem.short_term.retrieve("v")
    assert [type(x) for x in got] == [bool, int, float]


def test_tuple_becomes_list(mem):
    mem.short_term.store("v", (1, (2, 3)))
    assert mem.short_term.retrieve("v") == [1, [2, 3]]


def test_dict_subclass_and_int_subclass_accepted(mem):
    class Level(enum.IntEnum):
        HIGH = 3

    mem.short_term.store("v", collections.OrderedDict(level=Level.HIGH))
    got = mem.short_term.retrieve("v")
    assert got == {"level": 3}
    assert type(got["level"]) is int


def test_unsupported_type_names_the_path(mem):
    with pytest.raises(TypeError) as ei:
        mem.short_term.store("k", {"a": [1, 2, {3}]})
    assert str(ei.value).startswith("value.a[2]: unsupported type set")


@pytest.mark.parametrize(
    "bad, path, tname",
    [
        (b"bytes", "value", "bytes"),
        ({"x": object()}, "value.x", "object"),
        ([1, {"deep": {"er": 1j}}], "value[1].deep.er", "complex"),
        ({"odd key!": {1, 2}}, 'value["odd key!"]', "set"),
    ],
)
def test_unsupported_types(mem, bad, path, tname):
    with pytest.raises(TypeError) as ei:
        mem.short_term.store("k", bad)
    assert str(ei.value).startswith(f"{path}: unsupported type {tname}")
    assert mem.short_term.retrieve("k") is None


def test_non_str_dict_key_is_type_error(mem):
    with pytest.raises(TypeError, match=r"value\.a: dict keys must be str, got int"):
        mem.short_term.store("k", {"a": {1: "x"}})


@pytest.mark.parametrize("f", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_invalid_input(mem, f):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.short_term.store("k", {"a": [f]})
    assert ei.value.field == "value.a[0]"
    assert "value.a[0]" in str(ei.value)


def test_huge_int_is_invalid_input(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.short_term.store("k", [2**64])
    assert ei.value.field == "value[0]"


def test_field_name_follows_the_argument(mem):
    with pytest.raises(TypeError, match=r"^knowledge\.x: unsupported type set"):
        mem.semantic.store("k", {"x": set()})
    mem.semantic.store("k", {"x": 1})
    with pytest.raises(TypeError, match=r"^patch\.y: unsupported type frozenset"):
        mem.semantic.update("k", {"y": frozenset()})
    with pytest.raises(TypeError, match=r"^content\[0\]: unsupported type bytes"):
        mem.episodic.record("s", content=[b"x"])


def test_too_deep_is_limit_exceeded(mem):
    v: list = []
    cur = v
    for _ in range(200):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    with pytest.raises(memstrata.LimitExceededError) as ei:
        mem.short_term.store("k", v)
    assert ei.value.field == "value"


def test_self_referencing_list_does_not_recurse_forever(mem):
    v: list = []
    v.append(v)
    with pytest.raises(memstrata.LimitExceededError):
        mem.short_term.store("k", v)


def test_depth_at_the_limit_is_accepted(mem):
    v: list = []
    cur = v
    for _ in range(127):  # 128 levels of nesting in all
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    mem.short_term.store("k", v)
    assert mem.short_term.retrieve("k") == v


def test_returned_values_are_fresh_objects(mem):
    mem.short_term.store("k", {"a": [1]})
    got = mem.short_term.retrieve("k")
    got["a"].append(2)
    assert mem.short_term.retrieve("k") == {"a": [1]}
