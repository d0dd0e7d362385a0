"""Smoke test of the installed `memstrata` wheel (run by scripts/test-dist.sh in a fresh
virtualenv, with no Rust toolchain on PATH): every layer, continuity, maintenance,
export/import and encryption at rest, through the package as a user installs it."""

import os
import sys
import tempfile

import memstrata


def check(cond: bool, what: str) -> None:
    if not cond:
        raise SystemExit(f"smoke_python: FAILED: {what}")


def main() -> None:
    where = os.path.dirname(memstrata.__file__)
    check("site-packages" in where, f"memstrata is imported from the installed wheel, not {where}")
    tmp = tempfile.mkdtemp(prefix="memstrata-dist-py-")
    path = os.path.join(tmp, "agent.mem")
    with memstrata.Memory(path, durability="immediate") as mem:
        # short-term
        mem.short_term.store("draft", {"text": "..."}, ttl=300)
        check(mem.short_term.retrieve("draft") == {"text": "..."}, "short_term round trip")
        check(mem.short_term.keys("dr") == ["draft"], "short_term keys")
        # working
        mem.working.focus("ticket-42")
        check(mem.working.current_focus() == ["ticket-42"], "working focus")
        item = mem.working.add_to_workspace({"note": "check logs"})
        check([i.id for i in mem.working.workspace_items()] == [item], "working workspace")
        # episodic
        mem.episodic.record("Deployed v2 to staging", participants=["alice"], tags=["deploy"], importance=7)
        mem.episodic.record("Lunch with the infra team", tags=["social"])
        hits = mem.episodic.search("staging deploy", limit=10)
        check(hits and hits[0].episode.summary == "Deployed v2 to staging", "episodic search")
        # semantic
        mem.semantic.store("user:alice", {"role": "admin"})
        k = mem.semantic.update("user:alice", {"team": "infra"})
        check(k.knowledge == {"role": "admin", "team": "infra"} and k.version == 2, "semantic merge patch")
        # procedural, with a host action
        mem.procedural.learn("triage", [
            {"id": "lookup", "action": "lookup", "parameters": {"user": "{{ params.user }}"}, "next": "save"},
            {"id": "save", "action": "semantic.store",
             "parameters": {"key": "triage:{{ params.user }}", "knowledge": "{{ last }}"}},
        ])
        seen = []
        run = mem.procedural.execute("triage", {"user": "bob"},
                                     actions={"lookup": lambda p: seen.append(p) or {"severity": 5}})
        check(run.status == "completed", f"procedure run completed ({run.status}, {run.error})")
        check(seen == [{"user": "bob"}], f"host action saw its parameters ({seen})")
        check(mem.semantic.retrieve("triage:bob") == {"severity": 5}, "procedure stored its result")
        # sessions
        s = mem.session_create("refactor", metadata={"repo": "x"})
        mem.session_save(s.session_id, {"step": 3}, compression_level=2)
        check(mem.session_restore(s.session_id).content == {"step": 3}, "session restore")
        # contexts
        mem.context_store("goal", {"ship": "v2"})
        check(mem.context_retrieve("goal").value == {"ship": "v2"}, "context store")
        other = mem.namespace("proj")
        other.semantic.store("only-here", 1)
        check(mem.semantic.get("only-here") is None, "namespaces are isolated")
        check("proj" in mem.contexts(), f"contexts lists proj ({mem.contexts()})")
        # timesheet
        t = mem.punch_in("claude", "refactor the parser")
        mem.punch_out(t.task_id, "done")
        check(mem.timesheet_report().tasks == 1, "timesheet report")
        # status, optimize
        st = mem.status(include_metrics=True)
        check(st.status == "healthy" and st.version, f"status ({st.status})")
        check(mem.optimize("light").success, "optimize")
        # export / import
        dump = os.path.join(tmp, "export.jsonl")
        exported = mem.export(dump).records
        check(exported > 0, "export wrote records")
    with memstrata.Memory(os.path.join(tmp, "copy.mem")) as copy:
        imported = copy.import_(dump).records
        check(imported == exported, f"import read back what export wrote ({imported} vs {exported})")
        check(copy.semantic.retrieve("user:alice") == {"role": "admin", "team": "infra"}, "imported knowledge")
    # encryption at rest: the right key opens the store, a wrong one is refused
    key = os.urandom(32)
    sealed = os.path.join(tmp, "sealed.mem")
    with memstrata.Memory(sealed, encryption_key=key, durability="immediate") as m:
        m.semantic.store("secret", {"pin": 1234})
    with memstrata.Memory(sealed, encryption_key=key) as m:
        check(m.semantic.retrieve("secret") == {"pin": 1234}, "encrypted store reopens with its key")
    try:
        memstrata.Memory(sealed, encryption_key=bytes(32))
    except memstrata.MemstrataError as e:
        check(getattr(e, "field", None) == "encryption_key", f"wrong key names the field ({e!r})")
    else:
        raise SystemExit("smoke_python: FAILED: an encrypted store opened with the wrong key")
    print(f"smoke_python: ok (Python {sys.version.split()[0]}, memstrata from {where})")


if __name__ == "__main__":
    main()
