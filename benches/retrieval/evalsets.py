"""Evaluation sets for the retrieval harness, in one shape.

Every set is a dict ``{"name", "about", "docs", "questions"}``:

- ``docs``: ``[{"id", "ns", "text", "speakers", "ts"?}]``: one memory each
  (recorded as one episode, summary = text, participants = speakers, in
  namespace ``ns``);
- ``questions``: ``[{"id", "ns", "text", "gold": [doc ids], "kind", "style"}]``:
  searched as typed in ``ns``; ``gold`` = the memories that hold the answer.

Sets:

- ``convmem``: the generated set (``generate.py``), always available.
- ``friendsqa``: FriendsQA (Emory NLP, Apache-2.0): questions about scenes of
  the TV show *Friends*, transcripts of real dialogue. Every utterance of the
  dev and test splits (about 5,600) is one memory in one namespace; a
  question's gold is the utterance(s) its answer spans come from
  (for "who" questions answered by a speaker, the utterance that speaker says).
- ``molweni``: Molweni (HIT-SCIR, Apache-2.0): questions over multi-party
  chats from the Ubuntu IRC channel. Every utterance of the MRC test split's
  100 dialogues is one memory, plus every utterance of the discourse-parsing
  dev and test dialogues (about 1,000 more chats from the same channel) as
  distractors, one namespace; gold = the utterance that contains the answer
  span (answerable questions only).
- ``friendsqa-mini``, ``molweni-mini``: small subsets shipped in
  ``benches/retrieval/data/`` for the tests (licences and attribution beside
  them): FriendsQA's first 40 test scenes; Molweni's first 50 MRC test chats
  with their first 8 answerable questions each (no distractors).

The public sets are not committed and cannot be downloaded by a script here:
their files live in the sets' GitHub repositories. Put them in the cache
directory (default ``$CARGO_TARGET_DIR/bench/data``) once:

    python benches/retrieval/evalsets.py install friendsqa PATH   # a clone of emorynlp/FriendsQA
    python benches/retrieval/evalsets.py install molweni PATH     # a clone of HIT-SCIR/Molweni

(PATH may be a work tree or a bare git directory.) ``load(name)`` raises
``Absent`` with those instructions when a set's files are missing.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MINI = HERE / "data" / "friendsqa_mini.json"
MINI_MOLWENI = HERE / "data" / "molweni_mini.json"

FILES = {
    "friendsqa": {"friendsqa_dev.json": "dat/friendsqa_dev.json", "friendsqa_tst.json": "dat/friendsqa_tst.json"},
    "molweni": {
        "mrc_test.json": "MRC(withDiscourse)/test.json",
        "dp_dev.json": "DP/dev.json",
        "dp_test.json": "DP/test.json",
    },
}
SOURCES = {"friendsqa": "github.com/emorynlp/FriendsQA", "molweni": "github.com/HIT-SCIR/Molweni"}


class Absent(RuntimeError):
    pass


def cache_dir() -> Path:
    env = os.environ.get("RETRIEVAL_DATA")
    if env:
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR", HERE.parent.parent / "target"))
    return target / "bench" / "data"


def _read(name: str, fname: str) -> Any:
    p = cache_dir() / name / fname
    if not p.exists():
        raise Absent(
            f"set {name!r} is absent: {p} not found. Clone {SOURCES[name]} and run "
            f"`python benches/retrieval/evalsets.py install {name} PATH_TO_CLONE` (see benches/retrieval/evalsets.py)"
        )
    return json.loads(p.read_text(encoding="utf-8"))


def install(name: str, src: str) -> None:
    """Copy a set's files from a clone (work tree or bare git dir) into the cache."""
    out = cache_dir() / name
    out.mkdir(parents=True, exist_ok=True)
    root = Path(src)
    for fname, rel in FILES[name].items():
        if (root / rel).exists():
            data = (root / rel).read_bytes()
        else:
            data = subprocess.run(["git", "--git-dir", str(root), "show", f"HEAD:{rel}"], check=True,
                                  capture_output=True).stdout
        json.loads(data)  # refuse a truncated or LFS-pointer file
        (out / fname).write_bytes(data)
        print(f"{name}: {rel} -> {out / fname} ({len(data)} bytes)")


def friendsqa_from(scenes: list[dict[str, Any]], name: str, about: str) -> dict[str, Any]:
    docs: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for scene in scenes:
        sid = scene["title"]
        para = scene["paragraphs"][0]
        utts = para["utterances:"]
        for u in utts:
            text = u["utterance"].strip()
            docs.append(dict(id=f"{sid}#{u['uid']}", ns="friends", text=text or "...",
                             speakers=[s for s in u["speakers"] if s]))
        for qa in para["qas"]:
            gold = sorted({f"{sid}#{a['utterance_id']}" for a in qa["answers"]})
            if not gold:
                continue
            word = qa["question"].split()[0].lower() if qa["question"].split() else "?"
            speaker = all(a.get("is_speaker") for a in qa["answers"])
            questions.append(dict(id=qa["id"], ns="friends", text=qa["question"], gold=gold,
                                  kind="speaker" if speaker else "content",
                                  style=word if word in ("what", "who", "where", "when", "why", "how") else "other"))
    return dict(name=name, about=about, docs=docs, questions=questions)


def friendsqa() -> dict[str, Any]:
    scenes = _read("friendsqa", "friendsqa_dev.json")["data"] + _read("friendsqa", "friendsqa_tst.json")["data"]
    return friendsqa_from(scenes, "friendsqa", "FriendsQA dev+test (Apache-2.0): Friends transcripts, one memory per utterance")


def friendsqa_mini() -> dict[str, Any]:
    d = json.loads(MINI.read_text(encoding="utf-8"))
    return friendsqa_from(d["data"], "friendsqa-mini", "FriendsQA subset shipped in benches/retrieval/data (Apache-2.0)")


def _edu_of(dialogue: dict[str, Any], start: int, text: str) -> int | None:
    """Index of the utterance whose span in the lower-cased context holds [start, start+len(text))."""
    ctx = dialogue["context"]
    pos = 0
    spans = []
    for e in dialogue["edus"]:
        piece = f"{e['speaker'].lower()}: {e['text'].lower()}"
        i = ctx.find(piece, pos)
        if i < 0:
            return None
        spans.append((i, i + len(piece)))
        pos = i + len(piece)
    for k, (a, b) in enumerate(spans):
        if a <= start < b:
            return k
    return None


def molweni_from(mrc: list[dict[str, Any]], distractors: list[list[dict[str, Any]]], name: str,
                 about: str) -> dict[str, Any]:
    chats: list[list[dict[str, Any]]] = []
    questions: list[dict[str, Any]] = []
    seen: set[tuple[str, ...]] = set()

    def add(prefix: str, edus: list[dict[str, Any]]) -> None:
        chats.append([dict(id=f"{prefix}#{k}", ns="ubuntu", text=e["text"] or "...",
                           speakers=[e["speaker"]] if e["speaker"].strip() else []) for k, e in enumerate(edus)])

    for di, d in enumerate(mrc):
        seen.add(tuple(e["text"] for e in d["edus"]))
        add(f"m{di}", d["edus"])
        for qa in d["qas"]:
            if qa.get("is_impossible") or not qa["answers"]:
                continue
            gold = set()
            for a in qa["answers"]:
                k = _edu_of(d, a["answer_start"], a["text"])
                if k is not None:
                    gold.add(f"m{di}#{k}")
            if not gold:
                continue
            word = qa["question"].split()[0].lower() if qa["question"].split() else "?"
            questions.append(dict(id=qa["id"], ns="ubuntu", text=qa["question"], gold=sorted(gold), kind="answerable",
                                  style=word if word in ("what", "who", "where", "when", "why", "how") else "other"))
    for si, split in enumerate(distractors):
        for di, d in enumerate(split):
            key = tuple(e["text"] for e in d["edus"])
            if key in seen:
                continue
            seen.add(key)
            add(f"d{si}.{di}", d["edus"])
    if distractors:
        # Record the chats in a seeded random order, not the answer chats first:
        # BM25 orders equal scores by when the memory was recorded, and with the
        # answer chats first, every tie at the 10th place went their way (62 of
        # 96 such questions: +0.007 recall@10 for BM25 alone, by recording order).
        random.Random(27).shuffle(chats)
    docs = [doc for chat in chats for doc in chat]
    return dict(name=name, about=about, docs=docs, questions=questions)


def molweni() -> dict[str, Any]:
    return molweni_from(
        _read("molweni", "mrc_test.json")["data"]["dialogues"],
        [_read("molweni", "dp_dev.json"), _read("molweni", "dp_test.json")],
        "molweni", "Molweni MRC test (Apache-2.0): Ubuntu IRC chats, one memory per utterance, "
        "with the discourse-parsing dev/test chats as distractors")


def molweni_mini() -> dict[str, Any]:
    d = json.loads(MINI_MOLWENI.read_text(encoding="utf-8"))
    return molweni_from(d["data"], [], "molweni-mini",
                        "Molweni subset shipped in benches/retrieval/data (Apache-2.0)")


def convmem() -> dict[str, Any]:
    import generate

    g = generate.generate()
    docs = [dict(id=t["id"], ns=p["name"], text=t["text"], speakers=[t["speaker"]], ts=t["ts"])
            for p in g["personas"] for t in p["turns"]]
    qs = [dict(id=q["id"], ns=q["persona"], text=q["text"], gold=q["gold"], kind=q["kind"], style=q["style"])
          for q in g["questions"]]
    return dict(name="convmem", about=f"generated conversational memory (seed {g['seed']})", docs=docs, questions=qs)


LOADERS = {"convmem": convmem, "friendsqa": friendsqa, "molweni": molweni, "friendsqa-mini": friendsqa_mini,
           "molweni-mini": molweni_mini}


def load(name: str) -> dict[str, Any]:
    sys.path.insert(0, str(HERE))
    return LOADERS[name]()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "install":
        install(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 2 and sys.argv[1] in LOADERS:
        s = load(sys.argv[1])
        print(s["name"], len(s["docs"]), "docs", len(s["questions"]), "questions")
    else:
        sys.exit("usage: evalsets.py install {friendsqa|molweni} PATH | datasets.py SET")
