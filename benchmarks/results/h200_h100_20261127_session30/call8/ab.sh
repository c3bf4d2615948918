set -uo pipefail
source benchmarks/gpu_env.sh >/dev/null
export TRITON_CACHE_DIR=/tmp/tcache
cp src/microscale/kernels/gemm_mxfp8_wgmma.py /tmp/new_wgmma.py
for v in new old new; do
  if [ $v = old ]; then cp benchmarks/_ab_old_wgmma.py src/microscale/kernels/gemm_mxfp8_wgmma.py; else cp /tmp/new_wgmma.py src/microscale/kernels/gemm_mxfp8_wgmma.py; fi
  echo "=== $v"; timeout 150 python3 benchmarks/bench_mxfp8_wgmma.py --shapes 16384x8192x8192 --data perchunk,gaussian 2>&1 | grep "wgmma kernel  \|wgmma kernel   \|bf16 " | grep -v "^{"
done
