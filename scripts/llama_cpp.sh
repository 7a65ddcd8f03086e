#!/usr/bin/env bash
# llama.cpp for the CPU default, from one pinned and checksummed artifact: the llama-cpp-python source
# distribution on PyPI. It gives (1) the llama-cpp-python wheel, built once per machine and kept in
# $WHEELS, and (2) llama.cpp's HF -> GGUF converter (convert_hf_to_gguf.py with its conversion/ and gguf-py/),
# which the installed package lacks, unpacked into VENV/share/llama.cpp (rubricrl.evals.llamacpp).
#
#   scripts/llama_cpp.sh VENV VERSION SHA256
#
# The build is portable x86-64 with AVX2 (GGML_NATIVE=OFF: the -march=native build crashed on an AVX-512
# host) and leaves out what the Python package never loads (the multimodal mtmd library, tools, examples,
# tests): 140 compile units, ~6 min on 2 cores. `make setup` runs this in the background while pip installs
# everything else.
set -euo pipefail
venv=$1 version=$2 sha=$3
cache=${RUBRICRL_CACHE:-$HOME/.cache/rubricrl}
wheels=${WHEELS:-$cache/wheels}
sdist=$cache/sdist/llama_cpp_python-$version.tar.gz
mkdir -p "$cache/sdist" "$wheels"

if [ ! -f "$sdist" ] || ! echo "$sha  $sdist" | sha256sum -c --quiet - 2>/dev/null; then
  tmp=$(mktemp -d)
  # The file itself, through the index's JSON simple API (PEP 691): `pip download` would first build the
  # sdist's metadata (~2 minutes of build dependencies and CMake). The sha256 is checked below either way.
  "$venv/bin/python" - "$version" "$tmp" "${PIP_INDEX_URL:-https://pypi.org/simple}" <<'PY'
import json, sys, urllib.request
version, folder, index = sys.argv[1:]
name = f"llama_cpp_python-{version}.tar.gz"
req = urllib.request.Request(f"{index.rstrip('/')}/llama-cpp-python/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(req, timeout=60))["files"]
url = next((f["url"] for f in files if f["filename"] == name), None)
if url is None:
    sys.exit(f"llama_cpp.sh: {index} has no {name}")
urllib.request.urlretrieve(url, f"{folder}/{name}")
PY
  if ! echo "$sha  $tmp/llama_cpp_python-$version.tar.gz" | sha256sum -c --quiet -; then
    echo "llama_cpp.sh: llama_cpp_python-$version.tar.gz does not match the pinned sha256 $sha" >&2
    rm -rf "$tmp"; exit 1
  fi
  mv "$tmp/llama_cpp_python-$version.tar.gz" "$sdist"; rm -rf "$tmp"
fi

# The converter, matched to this llama.cpp (its own gguf-py, not the gguf on PyPI), and the Qwen2 vocabulary
# llama.cpp tests its tokenizer with (models/ggml-vocab-qwen2.gguf and its test vectors): the tokenizer of the
# production miniature (tools/miniature.py: miniature_tokenizer), the real Qwen2.5 one, without a download.
share=$venv/share/llama.cpp
marker="$version $sha +vocab-qwen2"
if [ ! -f "$share/.version" ] || [ "$(cat "$share/.version")" != "$marker" ]; then
  tmp=$(mktemp -d)
  top=llama_cpp_python-$version/vendor/llama.cpp
  tar -xzf "$sdist" -C "$tmp" "$top/convert_hf_to_gguf.py" "$top/conversion" "$top/gguf-py" "$top/LICENSE" \
    "$top/models/ggml-vocab-qwen2.gguf" "$top/models/ggml-vocab-qwen2.gguf.inp" "$top/models/ggml-vocab-qwen2.gguf.out"
  rm -rf "$share"; mkdir -p "$(dirname "$share")"
  mv "$tmp/$top" "$share"; rm -rf "$tmp"
  echo "$marker" > "$share/.version"
fi

if ! ls "$wheels"/llama_cpp_python-"$version"-*.whl >/dev/null 2>&1; then
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
    "$venv/bin/pip" wheel -q --no-deps --no-cache-dir -w "$wheels" "$sdist"
fi
