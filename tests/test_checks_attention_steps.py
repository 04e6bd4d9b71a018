"""course.checks.attention_steps: attention's middle steps against torch's own
attention, and each wrong way against the plain formula of its mistake."""

import math

import torch
import torch.nn.functional as F

from course.checks import attention_steps as steps
from course.checks.mistaken import mistaken

B, H, T, d = 2, 3, 4, 5


def _start(keep):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, d, generator=gen) for _ in range(3))
    return {"q": q, "k": k, "v": v, "keep": keep}


def _keep():
    keep = torch.ones(B, 1, 1, T, dtype=torch.bool)
    keep[1, ..., -2:] = False  # the second example's last two keys padded
    return keep


def _all_steps():
    return [
        steps.scale(d, {"none": 1.0, "by-d": float(d)}),
        steps.fill_mask(
            ignored="ignored",
            inverted="inverted",
            multiplied="multiplied",
            after_softmax="after",
        ),
        steps.softmax({"queries": -2, "heads": 1}),
        steps.weigh(on_keys="on-k", probs_transposed="p-t", unmasked="unmasked"),
        steps.merge("mixed"),
    ]


def _right(start):
    state = dict(start)
    for step in _all_steps():
        state = step.right(state)
    return state


def test_the_right_steps_are_torchs_attention():
    start = _start(_keep())
    want = F.scaled_dot_product_attention(
        start["q"], start["k"], start["v"], attn_mask=start["keep"]
    )  # (B, H, T, d)
    got = _right(start)["c"]
    assert torch.allclose(got, want.transpose(1, 2).reshape(B, T, H * d), atol=1e-5)
    # control: without the merge's transpose the numbers differ
    assert not torch.allclose(got, want.reshape(B, T, H * d), atol=1e-3)


def test_each_wrong_way_gives_its_mistakes_numbers():
    start = _start(_keep())
    (singles, _pairs) = mistaken(start, _all_steps(), result=lambda st: st["c"])
    q, k, v, keep = start["q"], start["k"], start["v"], start["keep"]

    def merged(c):
        return c.transpose(1, 2).reshape(B, T, H * d)

    scores = q @ k.mT / math.sqrt(d)
    unscaled = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=1.0)
    assert torch.allclose(singles["none"][0], merged(unscaled), atol=1e-5)
    ignored = torch.softmax(scores, -1) @ v
    assert torch.allclose(singles["ignored"][0], merged(ignored), atol=1e-5)
    assert torch.allclose(singles["unmasked"][0], merged(ignored), atol=1e-5)
    after = (torch.softmax(scores, -1) * keep) @ v
    assert torch.allclose(singles["after"][0], merged(after), atol=1e-5)
    multiplied = torch.softmax(scores * keep, -1) @ v
    assert torch.allclose(singles["multiplied"][0], merged(multiplied), atol=1e-5)
    on_k = F.scaled_dot_product_attention(q, k, k, attn_mask=keep)
    assert torch.allclose(singles["on-k"][0], merged(on_k), atol=1e-5)
    right = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    assert torch.allclose(singles["mixed"][0], right.reshape(B, T, H * d), atol=1e-5)
    # the inverted mask: the first example has nothing padded, so its rows are
    # even (a finite fill) or NaN (-inf); the second attends only its padding;
    # -10000 added where a key may be attended leaves the first as unmasked
    finite, nan, added = singles["inverted"]
    assert torch.allclose(
        finite[0], merged(v.mean(2, keepdim=True).expand(B, H, T, d))[0]
    )
    assert bool(nan[0].isnan().all()) and not bool(nan[1].isnan().any())
    plus = torch.softmax(scores + keep.to(scores.dtype) * -10000.0, -1) @ v
    assert torch.allclose(added, merged(plus), atol=1e-5)
    # (up to float32's rounding of scores - 10000)
    assert torch.allclose(added[0], merged(ignored)[0], atol=1e-3)
    assert not torch.allclose(added[1], merged(ignored)[1], atol=1e-3)  # control


def test_mask_mistakes_need_something_masked():
    (singles, pairs) = mistaken(_start(None), _all_steps(), result=lambda st: st["c"])
    for absent in ("ignored", "inverted", "multiplied", "after", "unmasked"):
        assert absent not in singles
    assert "none" in singles and "queries" in singles  # control
    assert all("ignored" not in key for key in pairs)


def test_an_inverted_mask_that_blocks_nothing_blocks_every_key():
    """A mask that keeps every key (one token of a causal mask, a batch with no
    padding) still has its inverted way: every key blocked, a row of NaN with a
    -inf fill; the other mask mistakes there give the right numbers, so they are
    not ways."""
    keep = torch.ones(B, 1, 1, T, dtype=torch.bool)
    (singles, _) = mistaken(_start(keep), _all_steps(), result=lambda st: st["p"])
    assert "inverted" in singles
    assert any(bool(p.isnan().all()) for p in singles["inverted"])
    for absent in ("ignored", "multiplied", "after"):
        assert absent not in singles


def test_one_head_has_no_merge_mistake_and_other_lengths_no_transposed_probs():
    gen = torch.Generator().manual_seed(1)
    start = {
        "q": torch.randn(B, 1, 3, d, generator=gen),
        "k": torch.randn(B, 1, T, d, generator=gen),
        "v": torch.randn(B, 1, T, d, generator=gen),
        "keep": None,
    }
    (singles, _pairs) = mistaken(start, _all_steps(), result=lambda st: st["c"])
    assert "mixed" not in singles and "p-t" not in singles
    assert "on-k" in singles  # control


def test_a_key_mask_along_the_queries_is_each_plain_formula():
    blocked = torch.zeros(B, 1, T, 1, dtype=torch.bool)
    blocked[1, :, -2:] = True  # the second example's last two positions padded
    st = {"scaled": torch.randn(B, H, T, T, generator=torch.Generator().manual_seed(1))}
    s = st["scaled"]
    lowest = torch.finfo(s.dtype).min
    want = [
        s + blocked.to(s.dtype) * lowest,
        s.masked_fill(blocked, -1e9),
        s.masked_fill(blocked, -math.inf),
    ]
    got = [way(dict(st))["s"] for way in steps.along_queries(blocked)]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)
    # along the queries is not along the keys: the padded rows change, not columns
    assert torch.equal(got[1][1, :, :-2], s[1, :, :-2])
    assert not torch.equal(got[1][1, :, -2:], s[1, :, -2:])
