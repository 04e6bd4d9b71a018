"""Hints: written for every exercise in both languages, never the answer's code,
the named mistake's hint first, the next step unlocked as the setting says."""

import re

import nbformat
import pytest
import torch
from harness import run_cell

from course import (
    authoring,
    checks,
    grading,
    hintauthoring,
    hintbook,
    hints,
    hubhints,
    i18n,
    progress,
)
from course import catalog as catalogs
from course.checks import CheckFailed
from course.checks import softmax as softmax_checks
from course.grading import cells

A = "05_softmax_and_scaling"


def _english_notebooks() -> dict:
    return {py.stem: authoring.build(py) for py in authoring.sources()}


def test_every_exercise_has_three_steps_and_each_hint_a_translation():
    notebooks = _english_notebooks()
    book, texts = hintbook.book(), hintbook.texts()
    assert list(book) == list(notebooks) == list(texts)
    for assignment, nb in notebooks.items():
        answers = [c.id for c in nb.cells if cells.is_answer(c)]
        assert list(book[assignment]) == answers == list(texts[assignment])
        assert all(book[assignment][a]["steps"] >= 3 for a in answers)
        assert all(
            len(texts[assignment][a]["steps"]) == book[assignment][a]["steps"]
            for a in answers
        )
    templates = {
        hintbook.NAME_DOMAIN: hintauthoring.template(_built()),
        hintbook.TEXT_DOMAIN: hintauthoring.text_template(_built()),
    }
    for domain, template in templates.items():
        found = catalogs.read_catalog(i18n.catalog_path("zh", domain))
        done = catalogs.translations(found)
        wanted = {(m.context, m.id) for m in template if m.id}
        assert sorted(wanted - set(done)) == [], (
            "run python -m course.authoring --catalog"
        )
        assert {(m.context, m.id) for m in found if m.id} == wanted
        assert all(re.search("[\u4e00-\u9fff]", done[key]) for key in wanted)
        path = i18n.catalog_path("zh", domain).with_suffix(".mo")
        assert catalogs.compile_catalog(found) == path.read_bytes()


def _built() -> dict:
    """The hints as authoring builds them, texts and all."""
    declared = catalogs.declared_mistakes()
    return hintauthoring.build(_english_notebooks(), authoring.ROOT, declared)


def _solution_lines(nb) -> set[str]:
    """Each line of the answers (between nbgrader's solution markers), without its
    spaces; very short lines (``return x``) say nothing of an answer."""
    lines = set()
    for cell in nb.cells:
        if not cells.is_answer(cell):
            continue
        inside = False
        for line in cell.source.splitlines():
            if line.strip() in (cells.BEGIN_SOLUTION, cells.END_SOLUTION):
                inside = "BEGIN" in line
            elif inside and len(code := re.sub(r"\s+", "", line.split("#")[0])) > 8:
                lines.add(code)
    return lines


def _leaks(hint: str, lines: set[str]) -> list[str]:
    flat = re.sub(r"\s+", "", hint)
    return [line for line in lines if line in flat]


def test_no_hint_holds_a_line_of_the_answer():
    done = catalogs.translations(
        catalogs.read_catalog(i18n.catalog_path("zh", hintbook.TEXT_DOMAIN))
    )
    leaks = []
    for assignment, nb in _english_notebooks().items():
        lines = _solution_lines(nb)
        assert len(lines) >= 3, assignment
        for exercise, entry in hintbook.texts()[assignment].items():
            context = f"{assignment}/{exercise}"
            texts = entry["steps"] + list(entry["mistakes"].values())
            for text in texts + [done[(context, t)] for t in texts]:
                leaks += [f"{context}: {line}" for line in _leaks(text, lines)]
    assert leaks == []
    # The rule can fail: a hint that quotes the answer is caught.
    softmax_lines = _solution_lines(_english_notebooks()[A])
    quoted = "Try: return e / e.sum(dim=dim, keepdim=True)"
    assert _leaks(quoted, softmax_lines)


def test_a_hint_answers_a_mistake_a_check_declares(tmp_path):
    notebooks = {A: _english_notebooks()[A]}
    declared = catalogs.declared_mistakes()
    written = (authoring.ROOT / "source" / A / "hints.toml").read_text()
    (tmp_path / "source" / A).mkdir(parents=True)
    toml = tmp_path / "source" / A / "hints.toml"
    toml.write_text(written)
    built = hintauthoring.build(notebooks, tmp_path, declared)
    assert hintauthoring.public(built) == {A: hintbook.book()[A]}
    assert hintauthoring.written(built) == {A: hintbook.texts()[A]}
    toml.write_text(
        written.replace("[softmax.mistakes.wrong-dim]", "[softmax.mistakes.wrong-dims]")
    )
    with pytest.raises(ValueError, match="no check names the mistake 'wrong-dims'"):
        hintauthoring.build(notebooks, tmp_path, declared)
    # A mistake whose check sentence does not start with a readable clause needs a
    # name of its own; a written one must read too.
    nameless = written.replace('name = "rows do not sum to 1', '# name = "')
    toml.write_text(nameless)
    with pytest.raises(ValueError, match="give it a name"):
        hintauthoring.build(notebooks, tmp_path, declared)
    toml.write_text(written.replace('name = "rows do not sum to 1', 'name = "… too'))
    with pytest.raises(ValueError, match="give it a name"):
        hintauthoring.build(notebooks, tmp_path, declared)


def test_every_mistake_a_check_declares_has_a_hint():
    """A key given in the checks (``mistake="..."``) that no ``hints.toml`` answers
    is a misconception named with no hint; the control: one declared key left out
    of the hints is found."""
    hinted = {
        k for ex in hintbook.book().values() for e in ex.values() for k in e["mistakes"]
    }
    declared = set(catalogs.declared_mistakes())
    assert declared - hinted == set()
    assert hinted <= declared  # the authoring refuses the others
    assert declared - (hinted - {"overflow"}) == {"overflow"}


def test_a_key_names_one_sentence(monkeypatch, tmp_path):
    """Two sentences declared with one key would make a name ambiguous."""
    twice = tmp_path / "twice.py"
    twice.write_text('A = N_("one", mistake="k")\nB = N_("two", mistake="k")\n')
    monkeypatch.setattr(catalogs, "verdict_files", lambda: [twice])
    with pytest.raises(ValueError, match="'k' names two sentences"):
        catalogs.declared_mistakes()
    twice.write_text('A = N_("one", mistake="k")\nB = say("one", mistake="k")\n')
    assert catalogs.declared_mistakes() == {"k": "one"}


def _wrong_softmax(scores, dim=-1):
    e = (scores - scores.amax()).exp()
    return e / e.sum(0, keepdim=True)  # normalised over dim 0


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_mistake_a_check_names_is_found_in_its_verdict(monkeypatch, lang):
    monkeypatch.setenv("COURSE_LANG", lang)
    with pytest.raises(CheckFailed) as err:
        softmax_checks.softmax_rows(_wrong_softmax)
    named = err.value.mistakes
    assert named == ("wrong-dim",)
    assert hintbook.named_mistake(A, "softmax", named) == "wrong-dim"
    assert hintbook.named_mistake(A, "attention_scores", named) is None
    assert hintbook.named_mistake(A, "softmax", ()) is None
    big = torch.tensor([[1e4, 0.0]])
    with pytest.raises(CheckFailed) as err:
        softmax_checks._expect_softmax(lambda x, d: x.exp() / x.exp().sum(d), big, -1)
    assert hintbook.named_mistake(A, "softmax", err.value.mistakes) == "overflow"


# The answers as a notebook cell holds them: a raised error's hint reads the line.
CELL: dict = {"torch": torch}
run_cell(
    """
def no_keepdim(s, dim=-1):
    e = (s - s.max(dim).values).exp()
    return e / e.sum(dim)

def shifted(s, dim=-1):
    return s[..., 1:] - s

def dot_T(Q, K):
    return Q @ K.T

def fill_1e9(scores, mask, dim=-1):
    return torch.softmax(scores.masked_fill(~mask, -1e9), dim)

def add_pair(x):
    return x + (x, x)

def mask_added(scores, mask):
    return scores + mask  # (B, H, T, T) + (B, T): no head or query dim

def permute_3d(Q, K):
    return Q @ K.permute(0, 2, 1)

def dim_3(scores, dim=-1):
    e = scores.exp()
    return e / e.sum(dim=3, keepdim=True)

def item_eos(logits):
    return logits.argmax(-1).item() == 0

def if_eos(logits):
    return 1 if logits.argmax(-1) == 0 else 0

def batch_perm(layer, hidden, perm):
    return bool(torch.allclose(layer(hidden[perm]), layer(hidden)[perm]))

def same_length(Q, K, V):
    assert Q.shape == K.shape
    return Q @ K.mT @ V

def split_fixed(x, num_heads):
    return x.view(2, 4, num_heads, -1).transpose(1, 2)  # B and T typed in

def unpack3(x, W):
    B, T, D = x.shape
    return x @ W.T

def int_eos(logits):
    return int(logits.argmax(-1)) == 0

def view_tq(x, memory):
    B, T, D = x.shape
    return memory.view(B, T, 2, D // 2)

def none_mask(scores, mask=None):
    return scores + mask[:, None]  # the default None indexed

def whole_table(types, table):
    return types[..., None] + table  # (B, T, 1) + (64, D): token types of 0, 1

def mask_grew(scores, mask):
    B, H, T, _ = scores.shape
    return (scores + mask).reshape(B, H, T, T)

def heads_12(linear, head, head_size):
    return linear.weight.view(12, head_size, -1)[head], linear.bias[:head_size]

def d_64(x, num_heads):
    B, T, D = x.shape
    d = 64  # bert-base's head size
    return x.view(B, T, D // d, d).transpose(1, 2)
""",
    CELL,
)
HALF = torch.randn(2, 4).half()


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize(
    "assignment, exercise, fn, inputs, mistake",
    [
        (A, "softmax", CELL["no_keepdim"], [(2, 3, 4)], "keepdim"),
        (A, "softmax", CELL["shifted"], [(2, 3, 4)], "broadcast"),
        (A, "attention_scores", CELL["dot_T"], [(2, 3, 4, 5)] * 2, "dot-T-batched"),
        ("11_debugging", "masked_softmax", CELL["fill_1e9"], [HALF, HALF > 0], "half-fill-overflow"),
        ("09_build_a_transformer", "EncoderBlock", CELL["add_pair"], [(2, 3)], "tuple-operand"),
        (A, "attention_scores", lambda Q, K: torch.bmm(Q, K.mT), [(3, 4)] * 2, "bmm-3d"),
        ("03_head_slicing", "project_head", lambda x, W: torch.einsum("td,ed->te", x, W), [(2, 3, 4), (5, 4)], "einsum-no-ellipsis"),
        ("07_full_layer", "attention_block", CELL["mask_added"], [(2, 3, 4, 4), "mask"], "mask-dims"),
        ("09_build_a_transformer", "MultiHeadSelfAttention", CELL["mask_added"], [(2, 3, 4, 4), "mask"], "mask-dims"),
        ("07_full_layer", "embeddings_forward", CELL["whole_table"], ["types", (64, 4)], "broadcast"),
        ("06_manual_attention", "head_attention", CELL["none_mask"], [(2, 3)], "none-default"),
        (A, "attention_weights", CELL["permute_3d"], [(2, 3, 4, 5)] * 2, "permute-ndim"),
        (A, "softmax", CELL["dim_3"], [(4, 5)], "dim-from-front"),
        ("13_decoding", "greedy_generate", CELL["item_eos"], [(3, 7)], "item-on-batch"),
        ("13_decoding", "greedy_generate", CELL["if_eos"], [(3, 7)], "bool-of-tensor"),
        ("08_positions_and_masks", "permutation_check", CELL["batch_perm"], [torch.nn.Identity(), (2, 6, 4), torch.randperm(6)], "index-batch-dim"),
        ("11_debugging", "chunked_attention", CELL["same_length"], [(2, 3, 4), (2, 5, 4), (2, 5, 4)], "own-assert"),
        ("04_split_heads", "split_heads", CELL["split_fixed"], [(3, 5, 8), 2], "reshape-size"),
        ("03_head_slicing", "head_params", CELL["heads_12"], [torch.nn.Linear(8, 8), 1, 2], "typed-size"),
        ("04_split_heads", "split_heads", CELL["d_64"], [(3, 5, 8), 2], "typed-size"),
        ("09_build_a_transformer", "MultiHeadSelfAttention", CELL["mask_grew"], [(3, 1, 4, 4), "mask3"], "mask-grew"),
        ("03_head_slicing", "project_head", CELL["unpack3"], [(5, 4), (2, 4)], "unpack-shape"),
        ("13_decoding", "greedy_generate", CELL["int_eos"], [(3, 7)], "item-on-batch"),
        ("13_decoding", "cross_attention", CELL["view_tq"], [(2, 1, 8), (2, 5, 8)], "length-of-another"),
        ("13_decoding", "cross_attention", CELL["view_tq"], [(2, 4, 8), (2, 3, 8)], "length-of-another"),
    ],
)  # fmt: skip
def test_an_error_the_answer_raised_names_its_mistake(
    monkeypatch, lang, assignment, exercise, fn, inputs, mistake
):
    """An error the student's code raised gets the hint of its concept first
    (keepdim, .T on a batch, the mask's dims, a fill float16 cannot hold), not the
    general first step; a shape error with none of them on its line, the general
    broadcast hint."""
    monkeypatch.setenv("COURSE_LANG", lang)
    masks = {
        "mask": torch.ones(2, 4),
        "mask3": torch.ones(3, 4, 4, dtype=torch.bool),
        "types": torch.tensor([[0, 0, 1], [0, 1, 1]]),
    }
    args = [
        x
        if isinstance(x, torch.Tensor | torch.nn.Module | int)
        else masks[x]
        if isinstance(x, str)
        else torch.randn(*x)
        for x in inputs
    ]
    with pytest.raises(CheckFailed) as err:
        checks.call(fn, *args, name=exercise)
    assert hintbook.named_mistake(assignment, exercise, err.value.mistakes) == mistake


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_HINTS", raising=False)
    monkeypatch.setenv("COURSE_LANG", "en")
    return tmp_path


def test_the_named_mistake_comes_first_then_the_steps_in_order(work):
    store = progress.Store(work)
    store.record(A, "softmax", "fail", test="test_softmax_rows", mistake="wrong-dim")
    shown = [hints.hint("softmax", work=work) for _ in range(5)]
    assert [h.number for h in shown] == ["mistake:wrong-dim", "1", "2", "3", "3"]
    assert shown[0].text == hintbook.texts()[A]["softmax"]["mistakes"]["wrong-dim"]
    assert shown[1].text == hintbook.texts()[A]["softmax"]["steps"][0]
    assert "last hint" in shown[4].note
    assert "<code>dim</code>" in shown[2]._repr_html_()
    # Each request is an event: exercise, hint number, time.
    asked = [e for e in store.events(A) if e["kind"] == "hint"]
    assert [e["hint"] for e in asked] == ["mistake:wrong-dim", "1", "2", "3"]
    assert all(e["exercise"] == "softmax" and e["time"] > 0 for e in asked)
    # Asked again for an unlocked one; a locked one is refused.
    assert hints.hint("softmax", 2, work=work).text == shown[2].text
    assert hints.hint("attention_scores", 2, work=work).number == ""


def test_a_named_mistake_is_not_hidden_by_a_later_unnamed_failure(work):
    """05 in Chinese: one test named dim -2, the next said only 'largest
    difference 0.942'; the first hint is the named mistake's. After the answer
    cell runs again, what the tests said of the old code no longer counts."""
    store = progress.Store(work)
    store.record(A, "softmax", "run")
    store.record(A, "softmax", "fail", test="test_softmax_rows", mistake="query-dim")
    store.record(A, "softmax", "fail", test="test_softmax_random", mistake=None)
    assert hints.hint("softmax", work=work).number == "mistake:query-dim"
    store.record(A, "attention_scores", "run")
    store.record(
        A, "attention_scores", "fail", test="test_attention_scores_x", mistake="by-d"
    )
    store.record(A, "attention_scores", "run")
    store.record(A, "attention_scores", "fail", test="test_attention_scores_x")
    assert hints.hint("attention_scores", work=work).number == "1"


def test_after_failure_the_next_step_waits_for_a_failed_test(work, monkeypatch):
    monkeypatch.setenv("COURSE_HINTS", "after-failure")
    store = progress.Store(work)
    assert hints.hint("split_heads", work=work).number == "1"
    again = hints.hint("split_heads", work=work)
    assert again.number == "1" and "fails again" in again.note
    store.record("04_split_heads", "split_heads", "fail", test="test_split_heads_x")
    assert hints.hint("split_heads", work=work).number == "2"
    monkeypatch.setenv("COURSE_HINTS", "on-request")
    assert hints.hint("split_heads", work=work).number == "3"


def test_no_exercise_named_and_an_unknown_one(work):
    assert hints.hint(work=work).number == ""
    progress.Store(work).record(A, "dot_product_std", "fail", test="t")
    assert hints.hint(work=work).exercise == "dot_product_std"
    assert "No exercise" in hints.hint("sofmax", work=work).title


def test_no_hint_while_nbgrader_runs_the_notebook(work, monkeypatch):
    """Validate (and grading) run every cell: a hint cell left in the notebook
    asks no service, unlocks nothing and costs nothing."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    monkeypatch.setenv(hubhints.SERVICE_ENV, "/nonexistent/hints.sock")
    shown = hints.hint("softmax", work=work)
    assert shown.number == "" and "nbgrader runs" in shown.title
    assert progress.Store(work).events() == []
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert "did not answer" in hints.hint("softmax", work=work).title


def test_hints_speak_chinese(work, monkeypatch):
    monkeypatch.setenv("COURSE_LANG", "zh")
    shown = hints.hint("softmax", work=work)
    assert "提示 1/3" in shown.title and "softmax 把" in shown.text
    assert "还有 2 条" in shown.note


def test_a_notebook_check_module_offers_hint():
    assert softmax_checks.hint is hints.hint
    nb = nbformat.read(authoring.ROOT / "source" / A / f"{A}.ipynb", as_version=4)
    assert any("as check" in c.source for c in nb.cells)


def test_a_copy_of_the_course_gets_no_package_data(tmp_path):
    """Building an instructor's copy of the course writes its notebooks only: a
    ``course/`` folder there would shadow the installed package for nbgrader."""
    root = grading.make_course(tmp_path / "course")
    assert authoring.main(["--root", str(root)]) == 0
    assert (root / "source").is_dir() and not (root / "course").exists()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_costed_hint_s_note_joins_its_sentences_as_the_language_does(
    monkeypatch, lang
):
    monkeypatch.setenv("COURSE_LANG", lang)
    hint, key = hints.choose(
        hints.Asked(exercise="softmax"), assignment=A, shown=[], cost=0.5
    )
    assert key == "1" and "0.5" in hint.note
    if lang == "zh":
        assert "扣" in hint.note and re.search(r"[。！？]\s", hint.note) is None
    else:
        assert re.search(r"\. This hint costs 0\.5 points", hint.note)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_mistake_has_a_readable_name_in_the_language(monkeypatch, lang):
    monkeypatch.setenv("COURSE_LANG", lang)
    names = {}
    for assignment, exercises in hintbook.book().items():
        for exercise, entry in exercises.items():
            for key, mistake in entry["mistakes"].items():
                name = hintbook.mistake_name(assignment, exercise, key)
                names[assignment, exercise, key] = name
                assert hintbook.readable(name) and name != key, (exercise, key, name)
                if "name" not in mistake:  # its check's first clause
                    sentence = i18n.say(mistake["verdict"])
                    start = name.split("…")[0]
                    assert start and sentence.startswith(start), (key, name)
    if lang == "zh":
        assert all(re.search("[\u4e00-\u9fff]", n) for n in names.values())
    # 05's softmax: a written name, and the first clause of a check's sentence.
    said = {"en": ("rows do not sum to 1", "it normalises over dim -2 (the queries)"),
            "zh": ("每行之和不为 1", "它在维度 -2（查询）上做了归一化")}[lang]  # fmt: skip
    assert names[A, "softmax", "wrong-dim"].startswith(said[0])
    assert names[A, "softmax", "query-dim"] == said[1]
    assert hintbook.mistake_name(A, "softmax", "no-such-key") == "no-such-key"
