"""Encryption at rest through the binding: distinctive words written through
every layer (record keys included) are in no file of an encrypted store, and
are in a plaintext one (the control). The core runs the full check
(core/tests/sealed_keys.rs); this shows a binding's store passes it too."""

import pathlib

import memstrata

CONTEXT = "CtxPyQuokka"
WORDS = {
    "context": CONTEXT,
    "summary": "PySummaryNarwhal",
    "content": "PyContentOcelot",
    "participant": "PyParticipantPangolin",
    "tag": "PyTagWombat",
    "knowledge_key": "PyKeyAxolotl",
    "knowledge_value": "PyValueCapybara",
    "short_key": "PyStKeyTapir",
    "short_value": "PyStValueMarmot",
    "session": "PySessionLemur",
    "procedure": "PyProcGecko",
}


def write_words(m):
    w = WORDS
    m.switch_context(CONTEXT)
    m.episodic.record(
        f"meeting {w['summary']}",
        {"detail": w["content"]},
        participants=[w["participant"]],
        tags=[w["tag"]],
    )
    m.semantic.store(f"user:{w['knowledge_key']}", {"text": w["knowledge_value"]})
    m.short_term.store(w["short_key"], {"note": w["short_value"]})
    m.procedural.learn(w["procedure"], [{"id": "a", "action": "set", "parameters": {"x": 1}}])
    sid = m.session_create("s").session_id
    m.session_save(sid, {"state": w["session"]})
    return sid


def check_words(m, sid):
    w = WORDS
    assert CONTEXT in m.contexts()
    m.switch_context(CONTEXT)
    assert m.semantic.keys("user:") == [f"user:{w['knowledge_key']}"]
    assert m.short_term.keys("PySt") == [w["short_key"]]
    assert m.procedural.list() == [w["procedure"]]
    assert [h.episode.participants for h in m.episodic.search(w["summary"])] == [[w["participant"]]]
    assert m.session_restore(sid).content == {"state": w["session"]}


def found_words(root: pathlib.Path):
    blobs = [p.read_bytes() for p in root.rglob("*") if p.is_file()]
    return {
        name: word
        for name, word in WORDS.items()
        for form in (word, word.lower())
        if any(form.encode() in b for b in blobs)
    }


def test_no_word_of_any_layer_in_the_files_of_an_encrypted_store(tmp_path):
    plain = tmp_path / "plain.mem"
    with memstrata.Memory(plain) as m:
        sid = write_words(m)
        check_words(m, sid)
    assert set(found_words(plain)) == set(WORDS), "control: every word is in a plaintext store"

    sealed = tmp_path / "sealed.mem"
    key = bytes(range(1, 33))
    with memstrata.Memory(sealed, encryption_key=key) as m:
        sid = write_words(m)
        check_words(m, sid)
    assert found_words(sealed) == {}
    with memstrata.Memory(sealed, encryption_key=key) as m:
        check_words(m, sid)


def test_rekey_in_place_and_the_old_key_is_refused(tmp_path):
    path = tmp_path / "rotated.mem"
    old, new = bytes(range(32)), bytes(range(32, 64))
    with memstrata.Memory(path, encryption_key=old) as m:
        sid = write_words(m)
        ns = m.namespace(CONTEXT)
        # Another handle is open: refused, and this one keeps working.
        try:
            m.rekey(new)
            raise AssertionError("rekey with a namespace open should fail")
        except memstrata.StoreLockedError:
            pass
        ns.close()
        check_words(m, sid)
        m.rekey(new)
        assert m.active_context == CONTEXT
        check_words(m, sid)
    try:
        memstrata.Memory(path, encryption_key=old)
        raise AssertionError("the old key should be refused")
    except memstrata.InvalidInputError as e:
        assert e.field == "encryption_key" and "wrong encryption key" in str(e)
    with memstrata.Memory(path, encryption_key=new) as m:
        check_words(m, sid)
    assert found_words(path) == {}
