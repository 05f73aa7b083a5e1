#!/usr/bin/env bash
# Install the `native` extra (llama-cpp-python + gguf) into a venv, building the llama-cpp-python wheel
# once into a wheelhouse and reusing it on later runs.
#
#   bash .ci/install-native.sh .venv
#
# llama-cpp-python 0.3.36 is source-only on PyPI; a CPU build takes ~4 min on 2 cores, installing the
# cached wheel takes seconds. The wheelhouse lives in $KIMI_CHAT_WHEELHOUSE (default
# ~/.cache/kimi-chat-wheels).
set -euo pipefail

VENV="${1:?usage: install-native.sh VENV_DIR}"
PY="$VENV/bin/python"
[ -x "$PY" ] || { echo "install-native: no python at $PY" >&2; exit 2; }

LLAMA_VERSION=0.3.36
WHEELHOUSE="${KIMI_CHAT_WHEELHOUSE:-$HOME/.cache/kimi-chat-wheels}"
mkdir -p "$WHEELHOUSE"

# llama-cpp-python loads libllama through ctypes: its wheel is tagged py3-none-linux_<arch>, so one
# build serves every Python 3 of this machine kind
ARCH="$(uname -m)"
find_wheel() {
  ls "$WHEELHOUSE"/llama_cpp_python-"$LLAMA_VERSION"-*-linux_"$ARCH".whl 2>/dev/null | head -n 1 || true
}

WHEEL="$(find_wheel)"
if [ -z "$WHEEL" ]; then
  echo "install-native: building llama-cpp-python==$LLAMA_VERSION wheel for linux_$ARCH (takes a few minutes)" >&2
  BUILD_DIR="$(mktemp -d)"
  trap 'rm -rf "$BUILD_DIR"' EXIT
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL=2 \
    "$PY" -m pip wheel -q --no-deps --no-binary llama-cpp-python \
      -w "$BUILD_DIR" "llama-cpp-python==$LLAMA_VERSION"
  # move into place atomically, so an interrupted build never leaves a half-written wheel behind
  for f in "$BUILD_DIR"/llama_cpp_python-*.whl; do
    mv "$f" "$WHEELHOUSE/.tmp.$(basename "$f")"
    mv "$WHEELHOUSE/.tmp.$(basename "$f")" "$WHEELHOUSE/$(basename "$f")"
  done
  WHEEL="$(find_wheel)"
  [ -n "$WHEEL" ] || { echo "install-native: build produced no linux_$ARCH wheel" >&2; exit 1; }
else
  echo "install-native: reusing $WHEEL" >&2
fi

"$PY" -m pip install -q "$WHEEL" "gguf>=0.17"
"$PY" -c 'import llama_cpp, gguf; print("install-native: llama_cpp", llama_cpp.__version__, "gguf ok")'
