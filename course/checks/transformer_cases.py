"""What the checks of 09_build_a_transformer compare against and say: torch's
``MultiheadAttention`` and ``TransformerEncoderLayer`` loaded with the student's
weights, the misconceptions they name, and what each of those gives.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..i18n import N_

INVERTED = N_("the mask is inverted: True means the query may attend that key.")
UNMERGED = N_(
    "the heads were merged without the transpose: (B, H, T, d) reshaped "
    "straight to (B, T, H*d) mixes tokens and heads. Transpose to (B, T, H, d) "
    "first, then reshape."
)
FF_RESIDUAL = N_(
    "the feed-forward's residual is missing: with norm_first=False the block "
    "ends norm2(h + ff(h)), with norm_first=True h + ff(norm2(h)), where h is "
    "what the attention sublayer gave."
)


def _mha_like(att, d_model: int, heads: int) -> nn.MultiheadAttention:
    """torch's MultiheadAttention holding the student's four projections."""
    ref = nn.MultiheadAttention(d_model, heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(
            torch.cat([att.q_proj.weight, att.k_proj.weight, att.v_proj.weight])
        )
        ref.in_proj_bias.copy_(
            torch.cat([att.q_proj.bias, att.k_proj.bias, att.v_proj.bias])
        )
        ref.out_proj.weight.copy_(att.out_proj.weight)
        ref.out_proj.bias.copy_(att.out_proj.bias)
    return ref.eval()


def _torch_mask(mask, heads: int):
    """Our bool mask (True = may attend) as torch's attn_mask (True = blocked)."""
    if mask is None:
        return None
    return ~(mask if mask.dim() == 2 else mask.repeat_interleave(heads, dim=0))


def _unmerged(att, x, probs, heads: int) -> torch.Tensor:
    """The output if the heads' contexts (B, H, T, d) are reshaped to (B, T, D)
    without the transpose, from the module's own weights and the right probs."""
    B, T, D = x.shape
    with torch.no_grad():
        v = F.linear(x, att.v_proj.weight, att.v_proj.bias)
        v = v.reshape(B, T, heads, D // heads).transpose(1, 2)
        merged = (probs @ v).reshape(B, T, D)  # the transpose left out
        return F.linear(merged, att.out_proj.weight, att.out_proj.bias)


def _mha(ref, x, mask, heads: int):
    """torch's (out, per-head probs) for our bool mask (True = may attend)."""
    with torch.no_grad():
        return ref(
            x,
            x,
            x,
            attn_mask=_torch_mask(mask, heads),
            need_weights=True,
            average_attn_weights=False,
        )


def _reference_layer(block, *, d_model, heads, d_ff, norm_first):
    """torch's TransformerEncoderLayer (ReLU, no dropout) holding the weights of
    the student's ``block``, LayerNorm first or after as ``norm_first`` says."""
    ref = nn.TransformerEncoderLayer(
        d_model,
        heads,
        d_ff,
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=norm_first,
    )
    with torch.no_grad():
        ref.self_attn.load_state_dict(
            _mha_like(block.attn, d_model, heads).state_dict()
        )
        for mine, theirs in (
            (block.ff[0], ref.linear1),
            (block.ff[2], ref.linear2),
            (block.norm1, ref.norm1),
            (block.norm2, ref.norm2),
        ):
            theirs.load_state_dict(mine.state_dict())
    return ref.eval()


def _without_ff_residual(ref, x, attn_mask) -> torch.Tensor:
    """``ref``'s output with the feed-forward's residual left out (either LN
    order), computed from the reference layer's parts (the student's weights)."""

    def sa(y):
        return ref.self_attn(y, y, y, attn_mask=attn_mask, need_weights=False)[0]

    def ff(y):
        return ref.linear2(ref.activation(ref.linear1(y)))

    with torch.no_grad():
        if ref.norm_first:
            h = x + sa(ref.norm1(x))
            return ff(ref.norm2(h))
        return ref.norm2(ff(ref.norm1(x + sa(x))))
