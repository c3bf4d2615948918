"""The NVFP4 quantizer's launch settings (:data:`CONFIG`), with the measurement behind each.

:mod:`microscale.kernels.quant_nvfp4` chooses a pass and launches its kernels from these; every
setting gives the same bits (they choose tiles, passes and launch splits, never numerics), so
each was decided by a timing, recorded beside it (details in
``benchmarks/results/quant_notes.md``). ``benchmarks/bench_train.py``'s ``@`` variants and the
tests change them in place (``quant_nvfp4.CONFIG`` is this dict); the ``MICROSCALE_NVFP4_*``
environment variables set a few at import.
"""

from __future__ import annotations

import os

__all__ = ["CONFIG"]

# Tile shapes (tuned on H100; see benchmarks/results/quant_notes.md).
# PASS: "reg" (``quant_nvfp4_reg``: a column's 16-row block in one thread's registers; the
# default wherever it applies: 1x16 row views without RHT, 1x16 column views with or without
# RHT, RNE or SR), "rows" (``quant_nvfp4_rows``: the column view as rows of the transposed
# tile; what "reg" falls back to, e.g. for 2D weight views) or "v3" (the column view without
# transposes, below); all bit-identical. "rows" measured 3-19% faster than "v3" on an H200 for
# every row+column pair training runs (benchmarks/results/h200_20261123_quant_passes.log).
# Rows-pass tile: 32x32 with 4 warps ran the pairs a training step asks for 21-38% faster than
# 64x64 on an H200 at 16384x768 (64x64 needs 188-221 registers a thread: 12% occupancy,
# latency-bound; benchmarks/results/h200_20261123_quant_profile/). "V3": the v3 pass's tile.
# "REG": the reg pass's tile [16·NI, BC] and launch (maxnreg: ptxas's register cap, None =
# its own choice), and whether it takes stochastically rounded row views (ROW_SR: off, the rows
# pass ran the dy pair faster on an H100 in session 7); "REG_AMAX": its amax pass's, 3 programs
# an SM because that is what fits: 152 registers a thread, 3 CTAs of 4 warps (Nsight Compute,
# H100, Triton 3.6, session 18 call 1: 4 asked ran as 1.33 waves); 3 ran the x pair 3.5% and the
# 8192-wide pairs 2.3-2.7% faster, graph-replayed (call 2). SPLIT: a
# pair the reg pass refuses only for its SR row view (dy) runs as two reg-pass launches, the
# column view and then the row view alone, whose SR fits the registers without the column
# view beside it (same bits). Offline SASS (Triton 3.6) counts 55 + 50 instructions an
# element against the rows pass's 193, but the 125m nvfp4 step ran 1.7% slower with it (H100,
# session 14 call 6: 0.549x against 0.558x of bf16; x2 read twice, two launches a pair), so
# it was off until session 16 put it on for wide inputs only (below).
# SPLIT_MIN_COLS: with SPLIT, only pairs whose input is at least this wide split. Session 16
# (H100, graph-replayed, 16384 rows, bench_quant nvfp4/rowcol_dy): the rows pass is faster up
# to 2048 columns (116 against 134 µs at 768, 278 against 290 at 2048), level at 3072, the
# split 2.3% faster at 6144 and 3.9% at 8192; 1b nvfp4 step 0.772x (rows) -> 0.774x (split at
# every width) -> 0.776x (split above 4096 columns; call 11). Session 19 rounds the expanded
# views' E2M1 values in floating point (``_e2m1``: 55 -> 38.5 and 50 -> 35 SASS instructions
# an element for the two launches, against 193 -> 162 for the rows pass), and the split now
# wins at every width (H100, graph-replayed: 768 92 against 95 µs, 2048 204 against 219, 8192
# 708; call 1): so 0, every SR dy pair splits.
# SPLIT_EXP_COL: a pair whose column view is asked for expanded (nvfp4_no_sr's dy, RNE) splits
# too (both launches write their view expanded), instead of going to the rows pass (at most
# EXP_COL_ROWS_MAX_COLS wide) or to the reg pass plus a decode pass (wider). Session 19,
# offline SASS: 28.6 + 24.1 instructions an element for the two launches, against 50.6 and a
# 56-byte spill for the reg pass writing both views (REG['COL_EXP'] below).
# EXP_COL_ROWS_MAX_COLS: a pair whose column view is asked for expanded (nvfp4_no_sr's dy: the
# wgrad operand) and whose input is at most this wide goes to the rows pass, which writes that
# view expanded, instead of the reg pass plus a decode pass (0: never). Session 16, H100,
# graph-replayed, 16384 rows (bench_quant nvfp4/rowcol_dy_nosr): rows pass 14% faster at 768
# columns, 6-7% at 2048-3072; the reg pass 3.5% faster at 6144, 13% at 8192. Steps: 125m
# nvfp4_no_sr 0.624x -> 0.641x of bf16 (every width on the rows pass), 1b 0.789x -> 0.785x
# (its 6144/8192-wide dy too: hence the bound).
# REG["COL_EXP"]: the reg pass writes a column view asked for expanded itself (bf16 value ·
# scale: nvfp4_no_sr's dy pairs), not codes the op then decodes in a pass of its own. Off:
# same bits, but the kernel spills (64 B of stack, offline SASS) and the steps ran slower
# (H100, session 15 call 12: nvfp4_no_sr 0.574x -> 0.520x at 125m, 0.742x -> 0.686x at 1b).
CONFIG = {"BR": 32, "BC": 32, "num_warps": 4, "PROGS_PER_SM": 16, "NUM_STAGES": 2,
          "V3": {"BR": 64, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 8},
          "REG": {"NI": 16, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 2, "NUM_STAGES": 1,
                  "maxnreg": None, "ROW_SR": False, "COL_EXP": False},
          # REVERSE: the amax pass walks the tiles backwards, so the quantize pass after it
          # starts where it ended, on tiles still in L2 (session 20); an optional "maxnreg"
          # caps its registers (bench_quant.py --sweep, nvfp4/amax_pass). PAIRS: the
          # RHT's last butterfly stage folded into pair maxima, max(|a+b|, |a-b|) = |a| + |b|
          # (_rht.rht_pair_maxima; the same bits). Session 50, offline SASS (Triton 3.6,
          # sm_90, training's launch: unclamped, per-program maxima): 1584 -> 1456 static
          # instructions, 158 -> 128 registers, so 4 programs of 4 warps would fit an SM (3
          # now: PROGS_PER_SM). On since session 51 (H200, run_session51a_gpu.sh): the amax
          # GPU tests bit-exact with it on and off, the pass alone 1-2.5% faster at five
          # shapes (bench_quant --sweep, same amaxes), 1b nvfp4 training unchanged (0.8867x
          # against 0.8864x off, one process). 4 programs an SM with it measured slower there
          # (0.8849x). The grouped (MoE) amax pass's AMAX_PAIRS went on after its own GPU
          # test (session 51, call 7).
          "REG_AMAX": {"NI": 16, "BC": 32, "num_warps": 4, "PROGS_PER_SM": 3, "NUM_STAGES": 2,
                       "REVERSE": True, "PAIRS": True},
          # REG_ROW / REG_COL: the tile and launch of a reg-pass launch that carries one view
          # (a row view alone, a column view alone: single views and each launch of a split
          # pair). A row view alone loads two of its 16 raw tiles at a time (58-118 registers
          # a thread, against 121-246 with all 16 live), so more programs fit. Session 21
          # (H100, graph-replayed, 8192², amax given, every config bit-identical, call 2): the
          # column view alone ran 122 -> 120 µs (RHT) and 202 -> 159 µs (RHT + SR) at
          # [256, 32] tiles, 3 programs an SM, 2 stages, against the pair's [256, 64], 2, 1;
          # the row view alone (two raw tiles live) at 6 programs an SM (call 3): SR 172 ->
          # 154 µs, the SR dy pair's two launches 353 -> 314 µs (RNE codes: 114 -> 126).
          "REG_ROW": {"NI": 16, "BC": 64, "num_warps": 4, "PROGS_PER_SM": 6, "NUM_STAGES": 1,
                      "maxnreg": None},
          # REG_COL["RNE"]: a column view rounded to nearest, over those keys: with FAST_E2M1's
          # fewer registers 4 programs an SM fit; session 32 call 12 (8192², amax given): RHT
          # column view 98.7 -> 89.4 µs (58% -> 64% of the copy rate counting x once); the
          # SR column view ran slower there (124.4 -> 139.6), so it keeps the base tile.
          # REG_COL["PREFETCH"] (session 40, offline): a column view alone loads its next
          # tile before quantizing this one, as ROW1's; its registers want narrower tiles
          # (offline, SR with RHT: [256, 32] 163 -> 224, [256, 16] 67 -> 95). Session 41
          # (H200, call 1, graph-replayed, 8192², amax given): the RHT+SR column view 115.6 ->
          # 100.2 µs at [256, 16], 5 programs an SM (35% -> 40% of the copy rate counting x
          # once; 102.0-102.7 at the other tiles tried), the SR dy pair 250.4 -> 231.0; the
          # same bits. RNE column views (RNE): session 43 (H200, call 5, graph-replayed, amax
          # given, RHT column view, 8192² / 16384x768 / 16384x2048): their old tile ([256,
          # 32], 4 warps, 4 programs, no PREFETCH) 85.9-86.4 / 27.2-27.4 / 50.7 µs; [128, 32]
          # with 2 warps, 4 programs and PREFETCH 80.8 / 25.0 / 47.3 (47% -> 50% of the copy
          # rate counting x once); software-pipelining the old tile instead (NUM_STAGES 2) ran
          # level (88.5 / 28.5 / 51.7) and so did 125m nvfp4 with it (0.778x against 0.776 /
          # 0.780x); the same bits everywhere. Session 52 (H200, Nsight Compute on a 1b MLP as
          # training runs it, call 1): the recomputed relu²(u) column view (16384x8192, written
          # expanded) at 168 registers ran 4 programs of 2 warps an SM where 6 fit, 2 warps a
          # scheduler, latency-bound (216.8 µs). 6 programs (calls 2-4, graph-replayed, amax
          # given, bit-identical): that view 227.5 -> 201.8 µs, at 16384x3072 95.5 -> 82.6;
          # the RNE code views 47.0 -> 45.3 (16384x2048), 25.2 -> 25.0 (16384x768). In one
          # process against 4 programs: 1b nvfp4 0.8897x -> 0.8899x (call 2), 0.8853x /
          # 0.8879x -> 0.8888x / 0.8877x (call 4, alternated), 0.8874x -> 0.8938x (call 5);
          # 125m 0.7692x / 0.7697x -> 0.7757x / 0.7749x (call 5, alternated).
          # PHILOX_WIDE: the column view's Philox with each round's products as one wide
          # multiply (ROW1's PHILOX_WIDE; the same words). Offline SASS: codes 1448 -> 1408
          # instructions, expanded 1560 -> 1512. Session 42 (H200, call 1, 8192², off / on /
          # off in one process): the RHT+SR column view 100.7 / 100.0 / 100.8 µs, the SR dy
          # pair 232.0 / 231.5 / 232.5; the same bits. On (a small gain, no cost).
          # Session 59 (bf16 RHT views on pairs: RNE 167 -> 128 registers, SR 96 -> 80): 8 RNE
          # / 6 SR programs an SM won nowhere consistently (H200, call 2 sweep): kept 6 / 5.
          "REG_COL": {"NI": 16, "BC": 16, "num_warps": 4, "PROGS_PER_SM": 5, "NUM_STAGES": 1,
                      "maxnreg": None, "PREFETCH": True, "PHILOX_WIDE": True,
                      "RNE": {"NI": 8, "BC": 32, "num_warps": 2, "PROGS_PER_SM": 6,
                              "NUM_STAGES": 1, "PREFETCH": True}},
          "SPLIT": True, "SPLIT_MIN_COLS": 0, "SPLIT_EXP_COL": True, "SPLIT_SR_COL": True,
          # SPLIT_X_MAX_COLS: every other pair (the x pair: a round-to-nearest row view,
          # written expanded, beside the RHT'd column view) splits too where its input is at
          # most this wide (0: never). Its one launch holds all 16 raw tiles for both views
          # (offline SASS, Triton 3.9: 255 registers and 480 bytes of stack a thread, 2
          # programs an SM; Triton 3.6, the GPU machine's: 255 and no stack, session 37);
          # split, the column view alone runs at 3 and the row view alone at 6 (65
          # registers), x read once more. H100, session 25 call 4 (profiled, same
          # process): the 125m x pairs at 768 columns 3.27 -> 2.91 ms a step, with relu²'s
          # prologue at 3072 3.87 -> 3.93 ms (step 0.703x -> 0.707x of bf16 splitting both);
          # 1b (2048 / 8192) 0.872x -> 0.859x. So only narrow inputs split.
          "SPLIT_X_MAX_COLS": 1024,
          # ROW1: a row view alone of a bf16/fp16 input runs quant_nvfp4_row (a whole 16-element
          # block in one thread: no shuffle, one Philox a block in one thread, E2M1 codes from
          # the rounded value) instead of the reg pass's row view: "codes" for a view written
          # as codes (ms.quantize's 1x16 view), "expanded" for one written expanded (the split
          # pairs' second launch in training). Session 31 (H100, graph-replayed, amax given,
          # calls 5-6): 1x16 RNE codes at 8192² 125.9 -> 85.4 µs (46% -> 67% of the copy rate
          # counting x once; 16384x4096 alike), SR 150.6 -> 104.2 µs (38% -> 55%). Expanded
          # (the SR dy pair, 8192²): 303.9 -> 294.2 µs at this tile, 332.5 at [16, 16] blocks
          # with 4 warps (125m nvfp4 step 0.746x -> 0.721x of compiled bf16 with that tile,
          # call 5; 0.748x -> 0.749x with this one, call 6: level), so opt-in.
          # Session 32 (H100, call 2, 8192², graph-replayed, amax given): NAN_TILE (the block
          # maxima taken with NaN kept; the per-element NaN selects only in a tile that holds
          # a NaN) and STORE64 (a block's codes as one 8-byte store, the scale byte stored
          # from the thread that holds it: no regrouping through shared memory) with RNE codes
          # at [8, 16] blocks and 16 programs an SM (RNE_CODES): 86.5 -> 76.2 µs (67% -> 75%
          # of the copy rate counting x once); SR codes at [8, 8]: 103.6 -> 98.1 µs (55% ->
          # 58%), at [8, 4] with one warp (call 3) 95.5 µs (60%), at [4, 8] with one warp
          # (SR_CODES, call 7) 93.6 µs (61%; [8, 4] 94.8 in the same process, and 94.2
          # against 95.9 at 16384x4096). (Tried and dropped: SR fractions built from the
          # random bits instead of an int-to-float conversion, 101.2 -> 106.5 µs.) Session 36
          # (call 1): SR's floor as PTX mul.rz and its offset from the byte's bits beside the
          # binade (_e2m1._sr_sum: no slow-pipe conversion left), 94.2 -> 87.4 µs; the tile
          # sweep again: [4, 8] with one warp stays the fastest (86.8; [8, 4] 88.4).
          # Session 40 (H200, graph-replayed, 8192², amax given; calls 1-2): PREFETCH, the
          # next tile's words loaded before this tile is quantized (the loads were waited for
          # at 50% occupancy), with one warp a program: RNE codes 70.2 -> 58.7 µs at [2, 32]
          # blocks, 24 programs an SM (58% -> 69% of the copy rate counting x once), SR codes
          # 86.0 -> 75.4 (47% -> 54%); expanded views alone, against the reg pass: RNE 95.0 ->
          # 85.0 µs, SR 109.0 -> 87.7, the SR dy pair 272.2 -> 252.5, at [4, 8] blocks, 32
          # programs, so the row kernel now takes them too (125m nvfp4 0.760x -> 0.774x of
          # compiled bf16 in one process, 1b level: 0.890x / 0.894x against 0.890x).
          "ROW1": {"codes": os.environ.get("MICROSCALE_NVFP4_ROW1", "1") != "0",
                   "expanded": os.environ.get("MICROSCALE_NVFP4_ROW1_EXP", "1") != "0",
                   "BR": 4, "NB": 8, "num_warps": 1, "PROGS_PER_SM": 32, "NUM_STAGES": 1,
                   "NAN_TILE": True, "STORE64": True,
                   "PREFETCH": os.environ.get("MICROSCALE_NVFP4_ROW1_PREFETCH", "1") != "0",
                   # PHILOX_WIDE: Philox's two products a round as one wide multiply
                   # (_philox; offline SASS, Triton 3.6, the NaN-free path of the SR codes'
                   # [2, 32] tile: 761 -> 730 instructions, 126 -> 94 registers). Session 41
                   # (H200, graph-replayed, 8192², amax given, calls 1, 3): the expanded SR
                   # row view (training's) 103.2 -> 87.8 µs, SR codes 75.4 -> 75.1; 125m
                   # nvfp4 0.764x -> 0.771x of compiled bf16, 1b 0.896x -> 0.894-0.900x.
                   # (Tried and dropped there: code words packed straight from the grid bits,
                   # 591 -> 554 instructions for RNE codes but 95 registers: 58.9 -> 70.6 µs
                   # at 24 programs an SM, 58.8 at 20, level; ptxas 12.8 also dropped an
                   # element's `bits << 6` from the word, caught by the GPU tests.)
                   "PHILOX_WIDE": os.environ.get("MICROSCALE_NVFP4_ROW1_PHILOX_WIDE",
                                                 "1") != "0",
                   # SR_PRMT: SR codes take each random byte by one byte permute (_e2m1's
                   # _sr_sum with rpos; the same codes). Offline (session 59, Triton 3.6, the
                   # [2, 32] tile): 1672 -> 1608 static instructions, 80 registers both. Off
                   # until its GPU tests and a timing have run.
                   "SR_PRMT": False,
                   # rht: a row view with the RHT (codes, RNE or caller's bytes) rotated in
                   # the thread that holds its block (session 32 call 11: 83.7 µs at 8192²,
                   # amax given, 68% of the copy rate counting x once; the rows pass before,
                   # 24% with its amax pass, now 38%)
                   "rht": os.environ.get("MICROSCALE_NVFP4_ROW1_RHT", "1") != "0",
                   "RNE_CODES": {"BR": 2, "NB": 32, "PROGS_PER_SM": 24},
                   "SR_CODES": {"BR": 2, "NB": 32, "PROGS_PER_SM": 24},
                   # RHT_CODES: the rotated RNE codes' own tile. Session 58 (H200, call 3,
                   # graph-replayed, amax given, 8192² / 16384x4096; every tile bit-exact):
                   # with the bf16-pair clamp, rounding and maxima (80 -> 72 registers) the
                   # RNE codes' [2, 32] / 24 ran 67.5-67.7 / 67.5-67.6 µs (59.9-60.0% of the
                   # copy rate counting x once), 28 programs 67.4 / 67.6, [1, 64] / 28 66.7 /
                   # 66.9, capped at 64 registers (no spill offline) with 32 programs 65.7 /
                   # 65.9 (61.5-61.6%). (The caller's-bytes RHT codes would spill at 64: they
                   # keep the RNE codes' tile.)
                   "RHT_CODES": {"BR": 2, "NB": 32, "PROGS_PER_SM": 32, "maxnreg": 64}},
          # FAST_E2M1: the reg pass makes its E2M1 codes from the rounded value (the row
          # kernel's way, _e2m1.scaled_e2m1_code_fast; the same codes) instead of the compare-
          # and-select chain. Offline SASS (Triton 3.6, sm_90, session 31): x pair 54.1 -> 49.5
          # instructions an element, column view with RHT 29.6 -> 27.4, with RHT and SR 45.4 ->
          # 37.4. Timed (H100, session 32 call 1, graph-replayed, 16384x8192): column view with
          # RHT, amax given, 224.9 -> 181.2 µs, with SR 311.8 -> 231.5, x pair 458.5 -> 433.2;
          # 125m nvfp4 step 0.743x -> 0.749x of compiled bf16, 1b 0.884x -> 0.891x. On.
          "FAST_E2M1": os.environ.get("MICROSCALE_NVFP4_FAST_E2M1", "1") != "0",
          "EXP_COL_ROWS_MAX_COLS": 4096,
          "AMAX_BR": 64, "AMAX_BC": 64, "AMAX_WARPS": 4, "AMAX_PROGS_PER_SM": 4,
          # AMAX_PARTIALS: the reg amax pass leaves per-program maxima that the quantize launches
          # reduce (_amax_pass): no zeroed [2] buffer and no copy of the column view's amax (the
          # op's outputs may not share storage) per call, ~340 small kernels of a 125m step.
          "AMAX_PARTIALS": True,
          # AMAX_UNCLAMPED: the reg amax pass rotates a column view without the RHT's input
          # clamp to ±2^125 (two instructions an element) and checks max|x| per program
          # instead, clamping only where a program saw a larger value or an Inf (the same
          # bits: nvfp4_amax_reg_kernel). Session 28, H100, one process: 125m nvfp4 0.7437x ->
          # 0.7456x of compiled bf16, nvfp4_no_sr 0.758x -> 0.760x; bench_train
          # "@no-amax-unclamped" turns it off.
          "AMAX_UNCLAMPED": os.environ.get("MICROSCALE_NVFP4_AMAX_UNCLAMPED", "1") != "0",
          # COL_UNCLAMPED: a split pair's column view (the RHT, alone in its launch) rotates
          # without the RHT's input clamp where the amax pass's max|x| (the row view's amax,
          # measured beside it) is at most 2^125, as AMAX_UNCLAMPED does; larger values or an
          # Inf keep the clamp (the same bits either way). Session 52 (Nsight Compute): du's
          # column view is issue-bound at ~36 instructions an element, and the clamp is two
          # of them; 1b 0.8885x against 0.8907x off, one process. Session 53 (H200): its GPU
          # test passed; the 1b block (bench_block) ran 0.8% faster with it, inside that
          # bench's noise. Since session 54 every x pair splits too (NVFP4's xᵀ kept
          # expanded), so it takes the three x and five dy column views a layer (du's
          # amaxes come from its GEMM: it keeps the clamp); 1b, one process (call 5): 0.8934x
          # -> 0.8954x and 0.8939x -> 0.8992x, so on by default since then
          # (MICROSCALE_NVFP4_COL_UNCLAMPED=0, bench_train "@nv-col-clamped": off).
          "COL_UNCLAMPED": os.environ.get("MICROSCALE_NVFP4_COL_UNCLAMPED", "1") != "0",
          # EXP_NAN_MAX: an expanded row view (reg pass) takes each block's maximum with NaN
          # kept instead of selecting NaN to 0 per element first (a NaN block's values are all
          # NaN either way, through its NaN scale byte): offline SASS (Triton 3.9, sm_90) 23.0
          # -> 19.8 instructions an element for the row view alone, SR 34.2 -> 30.8, SR with
          # relu²'s backward 42.6 -> 39.1 (session 27; same bits, GPU-tested in session 28,
          # H100 125m nvfp4 0.732x -> 0.737x of compiled bf16 in one process; bench_train
          # "@no-exp-nan-max" turns it off)
          "EXP_NAN_MAX": os.environ.get("MICROSCALE_NVFP4_EXP_NAN_MAX", "1") != "0",
          "PASS": os.environ.get("MICROSCALE_NVFP4_PASS", "reg")}
