import pytest

import memstrata


def test_focus_and_current_focus(mem):
    assert mem.working.focus("task-a") is True
    assert mem.working.focus("task-b") is True
    assert mem.working.focus("task-a") is False
    assert mem.working.current_focus() == ["task-a", "task-b"]


def test_focus_capacity_evicts_oldest():
    with memstrata.Memory(focus_capacity=3) as m:
        for i in range(5):
            m.working.focus(f"f{i}")
        assert m.working.current_focus() == ["f2", "f3", "f4"]


def test_default_focus_capacity_is_seven(mem):
    for i in range(10):
        mem.working.focus(f"f{i}")
    assert mem.working.current_focus() == [f"f{i}" for i in range(3, 10)]


def test_workspace(mem):
    a = mem.working.add_to_workspace({"note": "x"})
    b = mem.working.add_to_workspace([1, 2])
    assert isinstance(a, str) and a != b
    assert mem.working.workspace() == [{"note": "x"}, [1, 2]]
    items = mem.working.workspace_items()
    assert [i.id for i in items] == [a, b]
    assert items[0].value == {"note": "x"}
    assert items[0].added_at.tzinfo is not None
    assert isinstance(items[0], memstrata.WorkspaceItem)
    assert repr(items[0]).startswith("WorkspaceItem(id='")


def test_workspace_capacity():
    with memstrata.Memory(workspace_capacity=2) as m:
        for i in range(4):
            m.working.add_to_workspace(i)
        assert m.working.workspace() == [2, 3]


def test_clear(mem):
    mem.working.focus("x")
    mem.working.add_to_workspace(1)
    assert mem.working.clear() is None
    assert mem.working.current_focus() == []
    assert mem.working.workspace() == []


def test_bad_focus_item(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.working.focus("")
    assert ei.value.field == "item"


def test_bad_workspace_value(mem):
    with pytest.raises(TypeError, match=r"^value\[0\]: unsupported type set"):
        mem.working.add_to_workspace([set()])


def test_capacity_must_be_an_int():
    with pytest.raises(TypeError, match="focus_capacity"):
        memstrata.Memory(focus_capacity="7")
    with pytest.raises(memstrata.InvalidInputError) as ei:
        memstrata.Memory(workspace_capacity=-1)
    assert ei.value.field == "workspace_capacity"
