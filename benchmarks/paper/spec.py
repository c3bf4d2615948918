"""The paper-reproduction experiment as data: one setting shared by every run, the queue of runs,
the fidelity variants, and the GPU-time estimate.

The NVFP4 paper (arXiv 2509.25149) trains a 12B model on 10T tokens; issue 14 asks for the same
comparisons at a scale one GPU can afford, each claim judged against the seed noise::

    setting    125m decoder (d 768, 20 blocks, ~126M params), byte tokens of the pysrc corpus
               (capped at 160 MB: ~152 MB train), 3052 steps x 32 x 1024 = 100.0M tokens, one
               epoch at most (order "epoch": no token is trained on twice), WSD schedule
               (warmup 150, peak 1e-3, linear decay over the last 18% to 0.1x), AdamW (fused on
               CUDA), compiled blocks + the step in one CUDA graph
    seeds      ``seed`` = the model's init + the stochastic-rounding stream; ``data_seed`` = 0
               for every run, so every run sees the same batches in the same order and is
               evaluated on the same validation batches
    queue      bf16 and nvfp4 x 3 seeds (the noise band), then one seed of each ablation:
               no SR, no RHT, no 2D, base, all blocks quantized, bf16 GEMMs from the decay on,
               mxfp4, mxfp8, fp8_blockwise; ``fidelity`` (gradient fidelity on snapshots of
               bf16_s0) runs right after bf16_s0, in the same lease, because snapshots live
               on the device's disk only

``RUNS`` is ordered by priority: if the GPU time runs out, what finished is the most useful part.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

__all__ = [
    "BF16_TOK_S",
    "JOBS",
    "RUNS",
    "SETTING",
    "RunSpec",
    "Setting",
    "estimate",
    "estimate_table",
    "find",
]


@dataclass(frozen=True)
class Setting:
    """Everything shared by the runs of the reproduction (the harness's TrainConfig fields)."""

    model: str = "125m"
    batch_size: int = 32
    seq_len: int = 1024
    steps: int = 3052                      # 3052 x 32 x 1024 = 100,007,936 tokens
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    lr_schedule: str = "wsd"
    decay_frac: float = 0.18               # the paper's decay: the last ~18% of training
    warmup: int = 150
    data: str = "pysrc"
    max_bytes: int | None = 160_000_000
    order: str = "epoch"
    data_seed: int = 0
    eval_every: int = 128
    eval_batches: int = 16
    log_every: int = 8
    ckpt_every: int = 1000                 # plus one at every piece's end (stop_after_s)
    compile: str = "on"
    cuda_graph: bool = True
    check_compile: bool = True             # compiled vs eager gradients at each piece's start
    fidelity_batches: int = 4              # fidelity: fixed validation batches of
    fidelity_batch_size: int = 8           # 8 x seq_len tokens,
    fidelity_draws: int = 4                # SR draws per batch (RNE recipes: one)

    @property
    def tokens(self) -> int:
        return self.steps * self.batch_size * self.seq_len

    @property
    def decay_start(self) -> int:
        return self.steps - round(self.decay_frac * self.steps)

    def scaled(self, **changes) -> Setting:
        """A copy with some fields changed (CPU smoke tests shrink the model and the steps)."""
        return dataclasses.replace(self, **changes)


SETTING = Setting()


@dataclass(frozen=True)
class RunSpec:
    """One run of the queue: a preset plus the flags that make it a variant.

    ``speed`` is the expected throughput relative to compiled bf16 at 125m on an H200 (measured
    for the presets, ``benchmarks/results/README.md``; derived for the variants, see
    :func:`estimate_table`); it only feeds the time estimate.
    """

    name: str
    recipe: str
    seed: int = 0
    keep_hp: str | None = None             # "none" = every block quantized
    switch: bool = False                   # bf16 GEMMs from the WSD decay on
    switch_mode: str = "all"
    speed: float = 1.0
    snapshots: bool = False                # keep weight snapshots for the fidelity job
    kind: str = "train"                    # "train" or "fidelity"

    def train_kwargs(self, setting: Setting) -> dict:
        """The harness's :class:`~microscale.train.TrainConfig` fields of this run."""
        fields = {f.name for f in dataclasses.fields(Setting) if not f.name.startswith("fidelity_")}
        kw = {k: getattr(setting, k) for k in fields}
        kw.update(recipe=self.recipe, seed=self.seed, keep_hp=self.keep_hp, switch_mode=self.switch_mode,
                  switch_step=setting.decay_start if self.switch else None)
        return kw

    def snapshot_steps(self, setting: Setting) -> tuple[int, ...]:
        """Where the fidelity snapshots are taken: 10% and 40% in, the decay start, the end."""
        if not self.snapshots:
            return ()
        steps = {max(1, round(0.1 * setting.steps)), max(1, round(0.4 * setting.steps)),
                 setting.decay_start, setting.steps}
        return tuple(sorted(steps))


def _runs() -> tuple[RunSpec, ...]:
    bf16 = [RunSpec(f"bf16_s{s}", "bf16", seed=s, snapshots=s == 0) for s in range(3)]
    nvfp4 = [RunSpec(f"nvfp4_s{s}", "nvfp4", seed=s, speed=0.53) for s in range(3)]
    fidelity = RunSpec("fidelity", "bf16", kind="fidelity", speed=0.0)
    one_seed = (
        RunSpec("nvfp4_no_sr", "nvfp4_no_sr", speed=0.57),
        RunSpec("nvfp4_no_rht", "nvfp4_no_rht", speed=0.53),
        RunSpec("nvfp4_no_2d", "nvfp4_no_2d", speed=0.53),
        RunSpec("nvfp4_base", "nvfp4_base", speed=0.57),
        RunSpec("nvfp4_all_blocks", "nvfp4", keep_hp="none", speed=0.50),
        # the "base": none of the four techniques (nvfp4_base keeps the last blocks)
        RunSpec("nvfp4_base_all_blocks", "nvfp4_base", keep_hp="none", speed=0.55),
        RunSpec("nvfp4_bf16_decay", "nvfp4", switch=True, switch_mode="all", speed=0.57),
        RunSpec("mxfp4", "mxfp4", speed=0.49),
        RunSpec("mxfp8", "mxfp8", speed=0.66),
        RunSpec("fp8_blockwise", "fp8_blockwise", speed=0.69),
    )
    return (bf16[0], fidelity, nvfp4[0], bf16[1], nvfp4[1], bf16[2], nvfp4[2], *one_seed)


JOBS: tuple[RunSpec, ...] = _runs()
RUNS: tuple[RunSpec, ...] = tuple(j for j in JOBS if j.kind == "train")


def find(name: str) -> RunSpec:
    for job in JOBS:
        if job.name == name:
            return job
    raise ValueError(f"unknown job {name!r}; the queue: {', '.join(j.name for j in JOBS)}")


# --------------------------------------------------------------------------- GPU-time estimate
BF16_TOK_S = 424_000        # compiled bf16 125m, step in a CUDA graph, one H200 (16 x 1024)
STARTUP_S = 75              # per run and piece: imports, model, compile, graph capture, load
SAVE_S = 10                 # one 1.5 GB checkpoint (weights + AdamW) with its SHA-256
FIDELITY_S = 420            # the fidelity job: 4 snapshots x 11 variants, eager


def estimate(job: RunSpec, setting: Setting = SETTING, piece_s: float = 555.0) -> dict:
    """Seconds of device time for one job, split into device calls of ``piece_s``."""
    if job.kind == "fidelity":
        return {"train_s": 0.0, "pieces": 1, "total_s": float(FIDELITY_S)}
    train_s = setting.tokens / (BF16_TOK_S * job.speed)
    evals_s = setting.steps // setting.eval_every * setting.eval_batches * 0.5 / BF16_TOK_S * \
        setting.batch_size * setting.seq_len / job.speed
    pieces = math.ceil((train_s + evals_s) / (piece_s - STARTUP_S - SAVE_S))
    return {"train_s": train_s, "pieces": pieces,
            "total_s": train_s + evals_s + pieces * (STARTUP_S + SAVE_S)}


def estimate_table(setting: Setting = SETTING, piece_s: float = 555.0) -> str:
    """A markdown table of the queue's device time (see :func:`estimate`)."""
    lines = ["| job | recipe | x bf16 tok/s | train s | pieces | device s |", "|---|---|---:|---:|---:|---:|"]
    total = 0.0
    for job in JOBS:
        e = estimate(job, setting, piece_s)
        total += e["total_s"]
        speed = f"{job.speed:.2f}" if job.kind == "train" else "-"
        lines.append(f"| {job.name} | {job.recipe} | {speed} | {e['train_s']:.0f} | {e['pieces']} | "
                     f"{e['total_s']:.0f} |")
    lines.append(f"| **total** | | | | | **{total:.0f} ({total / 3600:.2f} h)** |")
    return "\n".join(lines)
