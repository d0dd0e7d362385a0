import os
import pathlib

import pytest

import memstrata


def test_temporary_store(mem):
    assert mem.is_temporary is True
    assert os.path.isdir(mem.path)
    assert mem.active_context == "default"
    assert mem.closed is False
    assert repr(mem).startswith("Memory(path='")
    assert "active_context='default'" in repr(mem)


def test_temporary_store_is_removed_on_close():
    m = memstrata.Memory()
    path = pathlib.Path(m.path)
    m.short_term.store("k", 1)
    assert path.exists()
    m.close()
    assert not path.exists()


def test_path_store(store_path):
    with memstrata.Memory(store_path) as m:
        assert m.is_temporary is False
        assert pathlib.Path(m.path) == store_path.resolve()
        m.short_term.store("k", 1)
    assert store_path.is_dir()


def test_str_path(store_path):
    with memstrata.Memory(str(store_path), durability="immediate") as m:
        m.short_term.store("k", 1)


@pytest.mark.parametrize("durability", ["periodic", "immediate", "manual", "periodic:50"])
def test_durability_modes(store_path, durability):
    with memstrata.Memory(store_path, durability=durability) as m:
        m.short_term.store("k", durability)
        m.flush()
    with memstrata.Memory(store_path) as m:
        assert m.short_term.retrieve("k") == durability


def test_bad_durability(store_path):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        memstrata.Memory(store_path, durability="sometimes")
    assert ei.value.field == "durability"
    assert "sometimes" in str(ei.value)


def test_options_accepted(tmp_path):
    with memstrata.Memory(
        tmp_path / "s",
        durability="manual",
        cache_bytes=4 * 1024 * 1024,
        focus_capacity=2,
        workspace_capacity=3,
        session_retention=2,
        workspace_roots=[tmp_path, str(tmp_path)],
        index_writer_bytes=15_000_000,
        semantic_history=4,
        max_steps=50,
    ) as m:
        m.working.focus("a")
        m.working.focus("b")
        m.working.focus("c")
        assert m.working.current_focus() == ["b", "c"]


def test_positional_options_are_refused():
    with pytest.raises(TypeError):
        memstrata.Memory(None, "immediate")


def test_context_manager_closes():
    with memstrata.Memory() as m:
        st = m.short_term
        st.store("k", 1)
    assert m.closed is True
    with pytest.raises(memstrata.MemstrataError, match="closed"):
        st.retrieve("k")


def test_every_call_after_close_raises(mem):
    layers = (mem.short_term, mem.working, mem.episodic, mem.semantic, mem.procedural)
    mem.close()
    mem.close()  # idempotent
    assert repr(mem) == "Memory(<closed>)"
    calls = [
        lambda: mem.short_term.store("k", 1),
        lambda: layers[0].retrieve("k"),
        lambda: layers[0].keys(),
        lambda: layers[1].focus("x"),
        lambda: layers[1].workspace(),
        lambda: layers[2].record("x"),
        lambda: layers[2].search("x"),
        lambda: layers[3].store("k", 1),
        lambda: layers[3].query("k"),
        lambda: mem.namespace("p"),
        lambda: mem.switch_context("p"),
        lambda: mem.contexts(),
        lambda: mem.flush(),
        lambda: mem.active_context,
        lambda: mem.path,
        lambda: layers[4].list(),
        lambda: layers[4].execute("p"),
        lambda: layers[4].register_action("x", print),
        lambda: mem.session_create("s"),
        lambda: mem.session_list(),
        lambda: mem.context_store("k", 1),
        lambda: mem.context_retrieve("k"),
        lambda: mem.punch_in("a", "b"),
        lambda: mem.tasks(),
        lambda: mem.timesheet_report(),
        lambda: mem.status(),
        lambda: mem.optimize(),
        lambda: mem.export("x.jsonl"),
        lambda: mem.import_("x.jsonl"),
        lambda: mem.import_knowledge_graph("x.jsonl"),
    ]
    for call in calls:
        with pytest.raises(memstrata.MemstrataError) as ei:
            call()
        assert type(ei.value) is memstrata.MemstrataError
        assert ei.value.code == "CLOSED"
        assert "closed" in str(ei.value)


def test_namespace_isolates_layers(mem):
    proj = mem.namespace("proj")
    assert proj.active_context == "proj"
    assert mem.active_context == "default"
    proj.short_term.store("k", "proj value")
    mem.short_term.store("k", "default value")
    proj.semantic.store("fact", 1)
    proj.episodic.record("only in proj")
    assert proj.short_term.retrieve("k") == "proj value"
    assert mem.short_term.retrieve("k") == "default value"
    assert mem.semantic.retrieve("fact") is None
    assert mem.episodic.search("only in proj") == []
    assert len(proj.episodic.search("only in proj")) == 1
    assert mem.contexts() == ["default", "proj"]


def test_namespace_bad_name(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.namespace("bad name!")
    assert ei.value.field == "name"


def test_namespace_survives_parent_close():
    m = memstrata.Memory()
    ns = m.namespace("side")
    m.close()
    ns.short_term.store("k", 1)
    assert ns.short_term.retrieve("k") == 1
    ns.close()


def test_switch_context(mem):
    mem.short_term.store("k", "in default")
    mem.working.focus("default task")
    r = mem.switch_context("proj", preserve_current=True)
    assert isinstance(r, memstrata.SwitchResult)
    assert (r.success, r.previous_context, r.context_loaded) == (True, "default", False)
    assert mem.active_context == "proj"
    assert mem.short_term.retrieve("k") is None  # layer attributes follow the active context
    mem.short_term.store("k", "in proj")
    r = mem.switch_context("default")
    assert (r.previous_context, r.context_loaded) == ("proj", True)
    assert mem.short_term.retrieve("k") == "in default"
    assert mem.working.current_focus() == ["default task"]
    assert "previous_context='proj'" in repr(r)


def test_switch_context_without_preserving_clears_working(mem):
    mem.working.focus("task")
    mem.short_term.store("k", 1)
    mem.switch_context("other", preserve_current=False)
    mem.switch_context("default")
    assert mem.working.current_focus() == []
    assert mem.short_term.retrieve("k") == 1


def test_switch_context_bad_target(mem):
    with pytest.raises(memstrata.InvalidInputError) as ei:
        mem.switch_context("")
    assert ei.value.field == "target_context"
    assert mem.active_context == "default"


def test_contexts(mem):
    assert mem.contexts() == ["default"]
    mem.namespace("b").short_term.store("k", 1)
    mem.namespace("a").semantic.store("k", 1)
    assert mem.contexts() == ["a", "b", "default"]


def test_same_path_twice_shares_the_engine(store_path):
    a = memstrata.Memory(store_path)
    b = memstrata.Memory(store_path)
    a.short_term.store("k", "from a")
    assert b.short_term.retrieve("k") == "from a"
    a.close()
    assert b.short_term.retrieve("k") == "from a"
    b.close()


def test_flush(mem):
    mem.short_term.store("k", 1)
    assert mem.flush() is None


def test_version():
    assert isinstance(memstrata.__version__, str)
    assert memstrata.__version__.count(".") == 2


def test_module_constants(mem):
    assert memstrata.DEFAULT_CONTEXT == mem.active_context == "default"
    assert isinstance(memstrata.FORMAT_VERSION, int) and memstrata.FORMAT_VERSION >= 1
    assert isinstance(memstrata.EXPORT_FORMAT_VERSION, int) and memstrata.EXPORT_FORMAT_VERSION >= 1
    assert memstrata.SUMMARY_MAX_CHARS > 0
    s = mem.session_create("s")
    mem.session_save(s.session_id, 1, compression_level=memstrata.MAX_COMPRESSION_LEVEL)
    with pytest.raises(memstrata.InvalidInputError):
        mem.session_save(s.session_id, 1, compression_level=memstrata.MAX_COMPRESSION_LEVEL + 1)
    assert isinstance(memstrata.BUILTIN_ACTIONS, tuple) and "set" in memstrata.BUILTIN_ACTIONS
    for name in memstrata.BUILTIN_ACTIONS:
        with pytest.raises(memstrata.InvalidInputError):
            mem.procedural.register_action(name, lambda p: p)
