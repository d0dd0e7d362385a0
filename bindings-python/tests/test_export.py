import json

import pytest

import memstrata


def fill(m):
    m.short_term.store("draft", {"text": "hi"})
    m.working.focus("task")
    m.working.add_to_workspace({"w": 1})
    eid = m.episodic.record("Deployed v2 to staging", content={"pr": 42}, tags=["deploy"], importance=7)
    m.semantic.store("user:alice", {"role": "admin"})
    m.semantic.update("user:alice", {"team": "infra"})
    m.namespace("proj").semantic.store("fact", 1)
    s = m.session_create("refactor", metadata={"repo": "x"})
    m.session_save(s.session_id, {"step": 1}, compression_level=0)
    m.session_save(s.session_id, {"step": 2}, compression_level=3)
    m.procedural.learn("t", [{"id": "a", "action": "set", "parameters": {"v": 1}}])
    t = m.punch_in("claude", "work")
    m.punch_out(t.task_id, "done")
    return eid, s.session_id


def test_export_import_round_trip(tmp_path):
    backup = tmp_path / "backup.jsonl"
    with memstrata.Memory(tmp_path / "a") as a:
        eid, sid = fill(a)
        stats = a.export(backup)
    assert isinstance(stats, memstrata.ExportStats)
    assert stats.records == sum(stats.counts.values())
    assert stats.records > 0
    lines = backup.read_text(encoding="utf-8").splitlines()
    assert len(lines) == stats.records + 1  # header line
    assert all(isinstance(json.loads(line), dict) for line in lines)

    with memstrata.Memory(tmp_path / "b") as b:
        imported = b.import_(str(backup))
        assert isinstance(imported, memstrata.ImportStats)
        assert imported.records == stats.records
        assert b.short_term.retrieve("draft") == {"text": "hi"}
        assert b.working.current_focus() == ["task"]
        assert b.working.workspace() == [{"w": 1}]
        assert b.episodic.get(eid).summary == "Deployed v2 to staging"
        assert [h.episode.id for h in b.episodic.search("staging")] == [eid]
        assert b.semantic.retrieve("user:alice") == {"role": "admin", "team": "infra"}
        assert [v.version for v in b.semantic.history("user:alice")] == [1, 2]
        assert b.namespace("proj").semantic.retrieve("fact") == 1
        assert b.session_restore(sid, version=1).content == {"step": 1}
        assert b.session_restore(sid).content == {"step": 2}
        assert b.procedural.list() == ["t"]
        assert len(b.tasks()) == 1
        assert "ExportStats" not in repr(imported) and repr(imported).startswith("ImportStats(records=")


def test_design_sketch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with memstrata.Memory("agent.mem") as mem:
        mem.semantic.store("k", {"v": 1})
        mem.export("backup.jsonl")
    with memstrata.Memory("other.mem") as other:
        other.import_("backup.jsonl")
        assert other.semantic.retrieve("k") == {"v": 1}


def test_import_bad_file_writes_nothing(tmp_path, mem):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "memstrata_export", "format_version": 1}\n{"type": "nonsense"}\n')
    with pytest.raises(memstrata.InvalidInputError):
        mem.import_(bad)
    assert mem.semantic.keys() == []


def test_missing_file_is_io_error(tmp_path, mem):
    with pytest.raises(memstrata.IoError) as ei:
        mem.import_(tmp_path / "missing.jsonl")
    e = ei.value
    assert isinstance(e, OSError)
    assert e.errno == 2
    assert e.filename == str(tmp_path / "missing.jsonl")
    assert e.code == "IO"
    with pytest.raises(memstrata.IoError):
        mem.export(tmp_path / "no" / "such" / "dir" / "x.jsonl")


def test_import_knowledge_graph(tmp_path, mem):
    kg = tmp_path / "memory.jsonl"
    kg.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["likes tea"]},
                {"type": "entity", "name": "Acme", "entityType": "company", "observations": []},
                {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
            ]
        )
        + "\n"
    )
    stats = mem.import_knowledge_graph(kg)
    assert isinstance(stats, memstrata.ImportStats)
    assert stats.records >= 3
    alice = mem.semantic.retrieve("entity:Alice")
    assert alice["entityType"] == "person"
    assert alice["observations"] == ["likes tea"]
    assert alice["relations"] == [{"relationType": "works_at", "to": "Acme"}]
    assert [h.key for h in mem.semantic.query("tea")] == ["entity:Alice"]
