#!/usr/bin/env bash
# Builds a bundle that lets a real serving engine run on a GPU host that has no network but whose
# python3 already holds torch 2.11.0+cu130 (the H200 device machine: Python 3.12, CUDA 13).
#
#   bash scripts/gpu-bundle/build.sh vllm     # vLLM 0.26.0         -> .gpu-vllm/
#   bash scripts/gpu-bundle/build.sh sglang   # SGLang 0.5.17       -> .gpu-sglang/
#
# Run from the repository root. Downloads the wheels named in ENGINE.txt (no dependencies: the
# list is complete against the device image), unpacks them, removes the paths in ENGINE.strip,
# packs the rest with xz and splits it into parts of 55 MiB: .gpu-ENGINE/p1, p2, ... (git-ignored),
# plus .gpu-ENGINE/sha256 and .gpu-ENGINE/on-device.sh. One device call carries one part; a call
# carries at most 64 MiB, the checkout (about 6 MB) included; see on-device.sh.
set -euo pipefail
engine=${1:?usage: build.sh vllm|sglang}
here=$(cd "$(dirname "$0")" && pwd)
list=$here/$engine.txt
[ -f "$list" ] || { echo "build.sh: no wheel list $list" >&2; exit 2; }
dest=.gpu-$engine
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
grep -qx "/$dest/" .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo "/$dest/" >> .git/info/exclude; }
plat="--python-version 3.12 --implementation cp --abi cp312 --only-binary=:all: --no-deps"
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
         manylinux_2_34_x86_64 manylinux_2_31_x86_64 manylinux_2_26_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_5_x86_64 manylinux1_x86_64 manylinux2010_x86_64 manylinux_2_12_x86_64 linux_x86_64; do
  plat="$plat --platform $p"
done
echo "downloading $(grep -c '^[^#]' "$list") wheels..." >&2
pip download -q $plat -d "$work/whl" -r "$list" 2>&1 | { grep -v "is ignored" || true; } >&2
mkdir -p "$work/site"
for f in "$work"/whl/*.whl; do unzip -q -o "$f" -d "$work/site"; done
if [ -f "$here/$engine.strip" ]; then
  ( cd "$work/site" && grep -v '^#' "$here/$engine.strip" | while read -r pat; do
      [ -n "$pat" ] && rm -rf $pat; done )
fi
echo "unpacked: $(du -sm "$work/site" | cut -f1) MiB; packing..." >&2
tar -cf - -C "$work/site" . | xz -T0 -6 > "$work/site.tar.xz"
rm -rf "$dest"; mkdir -p "$dest"
split -b 55M -d -a 2 "$work/site.tar.xz" "$work/part."
i=1; for f in "$work"/part.*; do mkdir -p "$dest/p$i"; mv "$f" "$dest/p$i/"; i=$((i+1)); done
sha256sum "$work/site.tar.xz" | cut -c1-64 > "$dest/sha256"
cp "$here/on-device.sh" "$dest/"
# The wiki's own runtime dependencies (pyproject.toml, less the site-only ones: wiki-deps.py);
# with what they depend on; tests/gpu/run-on-device.sh installs there those the device image lacks.
python3 "$here/wiki-deps.py" > "$work/wiki-deps.txt"
pip download -q ${plat/--no-deps/} -d "$dest/deps" -r "$work/wiki-deps.txt" 2>&1 | { grep -v "is ignored" || true; } >&2
ls -la "$dest"/p* >&2
echo "bundle ready in $dest: carry each $dest/pN in its own device call (see on-device.sh)" >&2
