"""Prefill, then a decode loop with no host synchronisation: sampling on the device, one CUDA graph per batch.

The decode state lives in fixed device buffers (`tok` [B], `pos` [B], `step` [], `out` [B, N]); one step
reads them and writes them, so the same step can be replayed from a CUDA graph N times with nothing but
`graph.replay()` on the host. Greedy decoding (the default) runs wholly inside the graph. Temperature /
top-p sampling draws from the engine's own `torch.Generator` (seeded) after each replay — still on the
device, no sync — because a CUDA graph replays the default generator's state, not a private one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from moelab import ops, timing
from moelab.engine.cache import KVCache
from moelab.engine.config import EngineConfig
from moelab.engine.model import Model
from moelab.errors import UserError


@dataclass(frozen=True)
class Sampling:
    """temperature 0 = greedy (argmax). top_p in (0, 1]: nucleus sampling over the tempered softmax."""

    temperature: float = 0.0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise UserError(f"--temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise UserError(f"--top-p must be in (0, 1], got {self.top_p}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def sample(logits: torch.Tensor, s: Sampling, gen: torch.Generator | None) -> torch.Tensor:
    """Next token ids [B] (int64) from logits [B, V], on the logits' device, without a host sync.

    Sampling uses the exponential race: argmax_i p_i / e_i with e_i ~ Exp(1) picks i with probability p_i
    (it is the Gumbel-max trick), and unlike torch.multinomial it is one elementwise pass and an argmax.
    """
    if s.greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits.float() / s.temperature, dim=-1)
    if s.top_p < 1.0:
        sp, si = probs.sort(dim=-1, descending=True)
        # keep the smallest prefix whose mass reaches top_p (the first token always stays)
        drop = (sp.cumsum(dim=-1) - sp) >= s.top_p
        probs = torch.zeros_like(probs).scatter_(-1, si, sp.masked_fill(drop, 0.0))
    e = torch.empty_like(probs).exponential_(generator=gen)
    return (probs / e).argmax(dim=-1)


class Engine:
    """A model, its static cache and decode buffers for one batch size and context length.

    `prefill(prompt)` fills the cache and returns the last position's logits; `decode(first, n)` runs n
    steps from token `first` and returns the tokens [B, n]. `use_graphs` (CUDA only) captures one decode
    step in a CUDA graph the first time `decode` runs and replays it afterwards.
    """

    def __init__(self, cfg: EngineConfig, weights: dict[str, torch.Tensor], *, batch: int, max_len: int,
                 impl: str = "moelab", sampling: Sampling = Sampling(), use_graphs: bool = True,
                 keep_logits: bool = False):
        if batch < 1:
            raise UserError(f"--batch must be at least 1, got {batch}")
        if cfg.sliding_window and max_len > cfg.sliding_window:
            raise UserError(f"{cfg.model_type} uses sliding-window attention (window {cfg.sliding_window}); "
                            f"contexts longer than the window ({max_len} asked) are not supported yet")
        self.cfg, self.batch, self.max_len, self.sampling = cfg, batch, max_len, sampling
        self.embed = weights["embed"]
        self.device, self.dtype = self.embed.device, self.embed.dtype
        self.model = Model(cfg, weights, impl)
        self._greedy_emit = ops.get("greedy_emit", "moelab") if impl == "moelab" else None
        self.cache = KVCache(cfg, batch, max_len, self.dtype, self.device)
        # The eager references are not capturable (the MoE reference asks the host which experts were hit),
        # and they are the "before" of every comparison anyway: they launch from Python.
        self.use_graphs = use_graphs and self.device.type == "cuda" and impl == "moelab"
        self.keep_logits = keep_logits  # tests: every step's logits, kept on the device
        self.gen = None if sampling.greedy else torch.Generator(device=self.device)
        self.spec = None  # the model's ModelSpec, set by engine.build (for the run summary)
        self.prompt_len = 0
        self._graph: torch.cuda.CUDAGraph | None = None
        self._n_cap = 0
        self.step_logits: list[torch.Tensor] = []
        B, d = batch, self.device
        self.tok = torch.zeros(B, dtype=torch.long, device=d)
        self.pos = torch.zeros(B, dtype=torch.long, device=d)
        self.logits = torch.zeros(B, cfg.vocab, dtype=self.dtype, device=d)

    def reseed(self) -> None:
        """Restart the sampling generator from the seed: every run of one prompt draws the same tokens."""
        if self.gen is not None:
            self.gen.manual_seed(self.sampling.seed)

    # ------------------------------------------------------------------ prefill

    def check_prompt(self, prompt: torch.Tensor, new_tokens: int) -> None:
        """One-line errors for a prompt that does not fit: shape, vocabulary, cache size."""
        if prompt.dim() != 2 or prompt.shape[0] != self.batch or prompt.shape[1] < 1:
            raise UserError(f"prompt must be [batch={self.batch}, P>=1] token ids, got shape {list(prompt.shape)}")
        need = prompt.shape[1] + new_tokens
        if need > self.max_len:
            raise UserError(f"prompt of {prompt.shape[1]} tokens + {new_tokens} new tokens = {need} exceeds "
                            f"the cache's context of {self.max_len}")
        lo, hi = int(prompt.min()), int(prompt.max())  # once, before any work: not in the loop
        if lo < 0 or hi >= self.cfg.vocab:
            bad = lo if lo < 0 else hi
            raise UserError(f"token id {bad} is outside the vocabulary [0, {self.cfg.vocab})")

    @torch.inference_mode()
    def prefill(self, prompt: torch.Tensor) -> torch.Tensor:
        """prompt [B, P] int64 on the engine's device -> logits [B, V] of the last prompt position."""
        if prompt.dim() != 2 or prompt.shape[0] != self.batch or not 1 <= prompt.shape[1] <= self.max_len:
            raise UserError(f"prompt must be [batch={self.batch}, 1..{self.max_len}] token ids, "
                            f"got shape {list(prompt.shape)}")
        self.prompt_len = prompt.shape[1]
        logits = self.model.prefill(prompt, self.cache)
        self.cache.keep_prefill_states()
        return logits

    # ------------------------------------------------------------------ decode

    def _step(self, out: torch.Tensor, step: torch.Tensor) -> None:
        """One decode step on the fixed buffers: logits for (tok, pos); greedy: next token, written back."""
        self.logits.copy_(self.model.decode(self.tok, self.pos, self.cache))
        if self.sampling.greedy and self._greedy_emit is not None:
            # argmax, tok, out[:, step], pos + 1 and step + 1 in one launch (`greedy_emit`) instead of torch's
            # one-block argmax and four one-element kernels: batch 1 2.43 → 2.41 ms per token, batch 8 8.18 → 8.17
            # (H200, session 8, ab-chain-…T214730 / …T214834, the same tokens).
            self._greedy_emit(self.logits, self.tok, out, step, self.pos)
            return
        self.pos.add_(1)
        if self.sampling.greedy:
            self._emit(sample(self.logits, self.sampling, None), out, step)

    def _emit(self, nxt: torch.Tensor, out: torch.Tensor, step: torch.Tensor) -> None:
        self.tok.copy_(nxt)
        out.scatter_(1, step.view(1, 1).expand(self.batch, 1), nxt.view(-1, 1))
        step.add_(1)

    @torch.inference_mode()
    def decode(self, first: torch.Tensor, n: int) -> torch.Tensor:
        """n decode steps from `first` [B] (the token sampled from prefill) -> the n tokens after it [B, n].

        Position p = prompt_len + i for step i. The loop issues device work only: no .item(), no EOS check.
        """
        if self.prompt_len + n > self.max_len:
            raise UserError(f"{self.prompt_len} + {n} tokens exceed the cache's context of {self.max_len}")
        if n > self._n_cap:  # buffers sized for the longest run asked so far; a bigger one re-captures
            self._out = torch.zeros(self.batch, n, dtype=torch.long, device=self.device)
            self._stepi = torch.zeros((), dtype=torch.long, device=self.device)
            self._n_cap, self._graph = n, None
        out, stepi = self._out, self._stepi
        self.cache.restore_prefill_states()  # Gated DeltaNet: every run from the prefill's states, as K/V's positions
        self.tok.copy_(first)
        self.pos.fill_(self.prompt_len)
        stepi.zero_()
        self.step_logits = []
        replay = self._graph_step(out, stepi) if self.use_graphs else (lambda: self._step(out, stepi))
        for _ in range(n):
            replay()
            if not self.sampling.greedy:
                self._emit(sample(self.logits, self.sampling, self.gen), out, stepi)
            if self.keep_logits:
                self.step_logits.append(self.logits.clone())
        return out[:, :n].clone()  # `out` is the graph's buffer: the next run overwrites it

    def _graph_step(self, out: torch.Tensor, stepi: torch.Tensor):
        if self._graph is None:
            # Warm up on a side stream (allocator, Triton compilation), then capture one step. The warm-up
            # steps write the cache beyond the prompt, advance the Gated DeltaNet states and move the buffers:
            # restore them after (the states are at the prefill's here: decode restored them).
            timing.prime_graphs(self.device)  # never the process's first graph: that one runs slower (timing.py)
            tok0, pos0 = self.tok.clone(), self.pos.clone()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    self._step(out, stepi)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                self._step(out, stepi)
            self._graph = g
            self.tok.copy_(tok0)
            self.pos.copy_(pos0)
            self.cache.restore_prefill_states()
            stepi.zero_()
        return self._graph.replay

    @torch.inference_mode()
    def generate(self, prompt: torch.Tensor, new_tokens: int) -> torch.Tensor:
        """Prefill `prompt` [B, P], then `new_tokens` tokens in all -> [B, new_tokens] (the first comes from
        the prefill's logits, the other new_tokens-1 from decode steps)."""
        self.check_prompt(prompt, new_tokens)
        self.reseed()
        logits = self.prefill(prompt)
        first = sample(logits, self.sampling, self.gen)
        if new_tokens <= 1:
            return first.view(-1, 1)[:, :new_tokens]
        rest = self.decode(first, new_tokens - 1)
        return torch.cat([first.view(-1, 1), rest], dim=1)
