#!/usr/bin/env bash
# llama.cpp's llama-imatrix and llama-quantize, built once per machine from the same pinned llama-cpp-python sdist
# that scripts/llama_cpp.sh verified (portable: GGML_NATIVE off, as the wheel). The Python bindings cannot pass an
# importance matrix to the quantizer (the C API takes a C++ map), so imatrix quantization needs these two tools.
#   bash scripts/llama_tools.sh 0.3.36      # prints the bin folder (~/.cache/rubricrl/llama-tools/0.3.36/bin)
set -euo pipefail
version=$1
cache=${RUBRICRL_CACHE:-$HOME/.cache/rubricrl}
sdist=$cache/sdist/llama_cpp_python-$version.tar.gz
out=$cache/llama-tools/$version
if [ ! -x "$out/bin/llama-quantize" ] || [ ! -x "$out/bin/llama-imatrix" ]; then
  [ -f "$sdist" ] || { echo "llama_tools.sh: $sdist missing (make setup fetches and verifies it)" >&2; exit 1; }
  tmp=$(mktemp -d)
  tar -xzf "$sdist" -C "$tmp" "llama_cpp_python-$version/vendor/llama.cpp"
  src=$tmp/llama_cpp_python-$version/vendor/llama.cpp
  cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF >&2
  cmake --build "$tmp/build" --target llama-imatrix llama-quantize -j "$(nproc)" >&2
  mkdir -p "$out/bin.tmp"
  cp "$tmp/build/bin/llama-imatrix" "$tmp/build/bin/llama-quantize" "$out/bin.tmp/"
  rm -rf "$out/bin"; mv "$out/bin.tmp" "$out/bin"; rm -rf "$tmp"
fi
echo "$out/bin"
