# sourced by each call script: unpack carried artifacts, env, helpers
set -uo pipefail
mkdir -p .device/kernels .device/sass && tar xJf .device/kernels.tar.xz -C .device/kernels && tar xJf .device/tok.tar.xz -C .device && tar xJf .device/sass.tar.xz -C .device/sass
export ATLAS_KERNELS_DIR=$PWD/.device/kernels ATLAS_SASS_DIR=$PWD/.device/sass ATLAS_SUITE_REUSE_PTX=1 PYTHONPATH=$PWD/py:$PWD/tools:$PWD/tools/gpu:/tmp/site PYTHONUNBUFFERED=1
export ATLAS_COMMIT=$(cat .device/commit)
python3 -m pip install --no-index --no-deps --quiet --target /tmp/site .whl/*.whl
W=/tmp/cw; R=$W/r; L=$W/log; mkdir -p $R $L; C=/tmp/atlas_ckpt; G=$PWD/cfg
pack() { tar czf $OUT/all.tgz -C $W r log; }
trap pack EXIT
t() { local lim=$1 name=$2; shift 2; local s=$(date +%s); timeout $lim "$@" > $L/$name.log 2>&1; local rc=$?; echo "$name rc=$rc $(( $(date +%s)-s ))s"; tail -n ${TAILN:-4} $L/$name.log | cut -c1-230; pack; return $rc; }
hdr() { grep -E "GPU per step|async scheduling" $L/$1.log | cut -c1-200; }
python3 .device/mkcfg.py 2>&1 | tail -1
