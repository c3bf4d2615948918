# Sourced by the run_*_gpu.sh scripts: $OUT, PYTHONPATH, torchao from carried wheels (.whl/),
# and the device/software header in $OUT/env.txt.
OUT=${OUT:-gpu_out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/env.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" \
  | tee -a "$OUT/env.txt"
# step SECS LOG CMD...: run CMD time-limited, log to $OUT/LOG (USDT/DEBUG noise dropped), show
# the last ${TAIL:-40} lines.
step() { local secs=$1 log=$2; shift 2; echo "### $*" | tee "$OUT/$log"
         timeout "$secs" "$@" 2>&1 | grep -v '^USDT\|^DEBUG' | tee -a "$OUT/$log" | tail -"${TAIL:-40}"; }
# pack_out NAME: everything under $OUT into $OUT/NAME (a .tgz), the rest removed (the device tool
# returns only a few files).
pack_out() { (cd "$OUT" && tar czf "$1" --exclude="$1" * && \
              find . -mindepth 1 ! -name "$1" -exec rm -rf {} +); }
# deepgemm_env: build DeepGEMM from the carried .deps/DeepGEMM (tools/build_deepgemm.py, its own
# libstdc++ and -Bsymbolic: session 48), log to $OUT/dg_build.txt, put it on PYTHONPATH, JIT
# cache in /tmp/dgcache (kept while the machine stays warm). Session 49's scripts spell it out.
deepgemm_env() { export DG_JIT_CACHE_DIR=/tmp/dgcache; mkdir -p /tmp/dgcache
                 TAIL=2 step 150 dg_build.txt python3 tools/build_deepgemm.py \
                   "$PWD/.deps/DeepGEMM" symbolic
                 export PYTHONPATH=$PWD/.deps/DeepGEMM:$PYTHONPATH; }
