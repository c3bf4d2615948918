set -uo pipefail
source benchmarks/gpu_env.sh >/dev/null
export TRITON_CACHE_DIR=/tmp/tcache
timeout 150 python3 -m pytest -q -m gpu tests/test_kernels_mxfp8_wgmma.py 2>&1 | tail -3
cp src/microscale/kernels/gemm_mxfp8_wgmma.py /tmp/new_wgmma.py
for v in new old new; do
  if [ $v = old ]; then cp benchmarks/_ab_old_wgmma.py src/microscale/kernels/gemm_mxfp8_wgmma.py; else cp /tmp/new_wgmma.py src/microscale/kernels/gemm_mxfp8_wgmma.py; fi
  echo "=== $v"; timeout 100 python3 benchmarks/bench_mxfp8_wgmma.py --shapes 16384x8192x8192 --data gaussian 2>&1 | grep -v "^{" | grep "wgmma\|bf16 \|dequant"
done
