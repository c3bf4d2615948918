"""The harness on several processes (gloo, CPU): torchrun, FSDP2, DCP resume across world
sizes, and a NaN on one rank stopping every rank with exit code 3.

A 2-process ``torchrun`` run (the real launcher) trains the micro model with nvfp4 for 6 steps
and checkpoints every 2; its step-4 checkpoint is then resumed on 3 processes and on 1, and the
continuations are compared with the uninterrupted run.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest
import torch
import torch.multiprocessing as mp

ARGS = ["train", "--recipe", "nvfp4", "--model", "micro", "--steps", "6", "--batch-size", "6",
        "--seq-len", "64", "--max-bytes", "200000", "--eval-every", "3", "--eval-batches", "1",
        "--ckpt-every", "2", "--device", "cpu", "--no-progress", "--threads", "1"]
# Not bit-exact across world sizes: stochastic rounding draws per-rank streams and NVFP4 takes
# the per-tensor amax of x and dy per rank; over 6 steps of the micro model the runs differ by
# ~1e-3 relative (measured 2.6e-3 at most). 1e-2 leaves room, far below a wrong resume
# (a restart from step 0 or a skipped batch moves the loss by > 5%).
RTOL = 1e-2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def losses(run) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in map(json.loads, open(run / "metrics.jsonl"))}


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist") / "run2"
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
           "--master_port", str(free_port()), "-m", "microscale.train.cli", *ARGS,
           "--dist", "fsdp", "--out", str(out)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, done


def test_torchrun_fsdp_run_writes_once_and_matches_one_process(two_ranks, tmp_path):
    from microscale.train.cli import main
    out, done = two_ranks
    assert done.stdout.count("done: step 6") == 1                      # rank 0 reports
    config = json.loads((out / "config.json").read_text())
    assert config["world_size"] == 2 and config["quantized_all_gather"] is True
    steps = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert steps == ["step_000004.dcp", "step_000004.json", "step_000006.dcp", "step_000006.json"]
    assert sorted(losses(out)) == list(range(1, 7))                    # one writer, no dupes
    assert main([*ARGS, "--out", str(tmp_path / "one")]) == 0
    one = losses(tmp_path / "one")
    torch.testing.assert_close(list(losses(out).values()), list(one.values()), rtol=RTOL, atol=0)


def _resume_from_step_4(two_ranks, tmp_path):
    out, _ = two_ranks
    run = tmp_path / "resumed"
    shutil.copytree(out, run)
    (run / "checkpoints" / "step_000006.json").unlink()              # as if stopped after 4
    shutil.rmtree(run / "checkpoints" / "step_000006.dcp")
    return out, run


def _worker(rank: int, world: int, ports: list[int], run: str, codes: str) -> None:
    """A torchrun-like process: resume ``run`` on ``world`` ranks, then a run in which rank 1
    alone produces a NaN loss at step 2 (every rank must stop there with exit code 3)."""
    from microscale.train import cli
    from microscale.train.distributed import DistTrainer
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[0]))
    results = [cli.main([*ARGS, "--dist", "fsdp", "--out", run, "--resume"])]
    original = DistTrainer._forward_backward

    def nan_on_rank_1(self, x, y):
        loss, norm = original(self, x, y)
        return (loss * float("nan"), norm) if self.rank == 1 and self.sampler.index == 1 else \
            (loss, norm)

    DistTrainer._forward_backward = nan_on_rank_1
    os.environ["MASTER_PORT"] = str(ports[1])
    results.append(cli.main([*ARGS, "--dist", "ddp", "--out", run + "_nan"]))
    torch.save(results, os.path.join(codes, f"rank{rank}.pt"))


def test_resume_on_three_processes_and_nan_on_one_rank_stops_all(two_ranks, tmp_path, capfd):
    out, run = _resume_from_step_4(two_ranks, tmp_path)
    mp.spawn(_worker, args=(3, [free_port(), free_port()], str(run), str(tmp_path)), nprocs=3)
    codes = [torch.load(tmp_path / f"rank{r}.pt") for r in range(3)]
    assert codes == [[0, 3]] * 3
    assert capfd.readouterr().err.count("is nan at step 2; training stopped") == 3
    resumed, uninterrupted = losses(run), losses(out)
    assert sorted(resumed) == list(range(1, 7))
    assert all(resumed[s] == uninterrupted[s] for s in range(1, 5))   # kept as written
    torch.testing.assert_close([resumed[5], resumed[6]], [uninterrupted[5], uninterrupted[6]],
                               rtol=RTOL, atol=0)
    assert json.loads((run / "config.json").read_text())["world_size"] == 3


def test_resume_on_one_process(two_ranks, tmp_path, monkeypatch):
    from microscale.train.cli import main
    out, run = _resume_from_step_4(two_ranks, tmp_path)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for key, value in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}.items():
        monkeypatch.setenv(key, value)
    assert main([*ARGS, "--dist", "fsdp", "--out", str(run), "--resume"]) == 0
    resumed, uninterrupted = losses(run), losses(out)
    torch.testing.assert_close([resumed[5], resumed[6]], [uninterrupted[5], uninterrupted[6]],
                               rtol=RTOL, atol=0)
