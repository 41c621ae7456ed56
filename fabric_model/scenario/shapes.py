"""Parameter and FLOP counts of a transformer from its shape.

Parameters are counted per weight matrix (biases and norms are below 0.01% and left out):

- attention, grouped-query: ``h x heads x d`` (Q) + ``2 h x kv_heads x d`` (K, V) +
  ``heads x d x h`` (output), ``d`` the head size;
- attention, multi-head latent (DeepSeek MLA, ``kv_lora_rank > 0``): Q through an optional
  rank-``q_lora`` bottleneck to ``heads x (d + rope)``; K and V through ``h x (kv_lora +
  rope)`` and ``kv_lora x heads x 2d``; output ``heads x d x h``;
- feed-forward: ``3 h f`` gated (SwiGLU) or ``2 h f``; an MoE layer has ``n_experts +
  shared_experts`` of them and an ``h x n_experts`` router;
- embeddings: ``V h`` in, and ``V h`` out unless tied.

Model FLOPs per token follow the Megatron-LM formula (Narayanan et al. 2021, eq. 3:
``72 B s L h^2 (1 + s / 6h + V / 12hL)`` per batch): ``6 N`` for the weight matrices a token
passes through (the active ones for MoE, and the output layer; the input embedding is a
lookup), plus attention scores and values ``6 s x heads x (d_qk + d_v)`` per layer (``12 s h``
for standard attention, no causal halving, as the formula has it). Recomputation adds work
to the GPU, not to the model FLOPs that MFU counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fabric_model.scenario import ModelSpec

__all__ = ["ShapeCounts", "shape_counts"]


@dataclass(frozen=True)
class ShapeCounts:
    """Parameter and FLOP counts of one model shape (all counts are numbers of parameters).

    Attributes
    ----------
    attention_per_layer : float
        Parameters of one layer's attention block.
    ffn_per_expert : float
        Parameters of one routed (or shared) expert's feed-forward block.
    dense_ffn_per_layer : float
        Parameters of a dense layer's feed-forward block.
    router_per_layer : float
        Router parameters of one MoE layer (0 for dense models).
    moe_layers, dense_layers : int
        Layer counts of each kind.
    embedding : float
        Input embedding plus output layer (once if tied).
    output_layer : float
        The output (logit) layer, ``V h``: it costs FLOPs whether or not it is tied.
    attn_dim : float
        ``heads x (d_qk + d_v)``: the attention score term's width.
    """

    attention_per_layer: float
    ffn_per_expert: float
    dense_ffn_per_layer: float
    router_per_layer: float
    moe_layers: int
    dense_layers: int
    n_experts: int
    top_k: int
    shared_experts: int
    embedding: float
    output_layer: float
    attn_dim: float

    @property
    def expert_params(self) -> float:
        """Parameters of all routed experts (split by expert parallelism)."""
        return self.moe_layers * self.n_experts * self.ffn_per_expert

    @property
    def non_expert_layer_params(self) -> float:
        """Parameters of every layer except the routed experts (split by TP and PP)."""
        return (
            self.attention_per_layer * (self.moe_layers + self.dense_layers)
            + self.dense_ffn_per_layer * self.dense_layers
            + (self.shared_experts * self.ffn_per_expert + self.router_per_layer) * self.moe_layers
        )

    @property
    def total(self) -> float:
        """All parameters."""
        return self.non_expert_layer_params + self.expert_params + self.embedding

    @property
    def active(self) -> float:
        """Parameters one token uses (routed experts: ``top_k`` of them), with embeddings."""
        return (
            self.non_expert_layer_params
            + self.moe_layers * self.top_k * self.ffn_per_expert
            + self.embedding
        )

    @property
    def flop_params(self) -> float:
        """``N`` of ``6N``: active weight matrices a token is multiplied by, output layer in."""
        return (
            self.non_expert_layer_params
            + self.moe_layers * self.top_k * self.ffn_per_expert
            + self.output_layer
        )

    def model_flops_per_token(self, seq_len: int) -> float:
        """Megatron-LM model FLOPs per token (forward and backward, no recomputation)."""
        layers = self.moe_layers + self.dense_layers
        return 6.0 * self.flop_params + 6.0 * seq_len * self.attn_dim * layers

    def attention_flops_per_token(self, seq_len: int) -> float:
        """Return the attention score and value FLOPs of a token through every layer."""
        return 6.0 * seq_len * self.attn_dim * (self.moe_layers + self.dense_layers)


def shape_counts(m: ModelSpec) -> ShapeCounts:
    """Count the parameters of a :class:`ModelSpec` shape (see the module docstring)."""
    h = float(m.hidden)
    d = float(m.head_dim or m.hidden // m.heads)
    if m.kv_lora_rank:  # multi-head latent attention
        q_out = m.heads * (d + m.rope_head_dim)
        q = h * m.q_lora_rank + m.q_lora_rank * q_out if m.q_lora_rank else h * q_out
        kv = h * (m.kv_lora_rank + m.rope_head_dim) + m.kv_lora_rank * m.heads * 2 * d
        attn = q + kv + m.heads * d * h
        attn_dim = m.heads * ((d + m.rope_head_dim) + d)
    else:
        attn = h * m.heads * d + 2 * h * m.kv_heads * d + m.heads * d * h
        attn_dim = m.heads * 2 * d
    mats = 3.0 if m.gated_mlp else 2.0
    moe = m.kind == "moe"
    dense_layers = m.dense_layers if moe else m.layers
    dense_ffn = mats * h * (m.dense_ffn_hidden or m.ffn_hidden)
    out_layer = m.vocab * h
    return ShapeCounts(
        attention_per_layer=attn,
        ffn_per_expert=mats * h * m.ffn_hidden,
        dense_ffn_per_layer=dense_ffn,
        router_per_layer=h * m.n_experts if moe else 0.0,
        moe_layers=m.layers - dense_layers,
        dense_layers=dense_layers,
        n_experts=m.n_experts if moe else 0,
        top_k=m.top_k if moe else 0,
        shared_experts=m.shared_experts if moe else 0,
        embedding=out_layer * (1 if m.tied_embeddings else 2),
        output_layer=out_layer,
        attn_dim=attn_dim,
    )
