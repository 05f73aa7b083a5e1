#!/usr/bin/env bash
# Install the `native` extra (llama-cpp-python + gguf) into a venv, building the llama-cpp-python wheel
# once into a wheelhouse and reusing it on later runs; also build `llama-server` from the llama.cpp
# source vendored in the same sdist (for tests/engines/test_llama_server.py) and install it as VENV/bin/llama-server.
#
#   bash .ci/install-native.sh .venv
#
# llama-cpp-python 0.3.36 is source-only on PyPI; a CPU build takes ~4 min on 2 cores, the static
# CPU llama-server 5.5 min more (measured cold on an idle 2-core box); installing the cached wheel and
# binary takes seconds. The wheelhouse lives in $KIMI_CHAT_WHEELHOUSE (default
# ~/.cache/kimi-chat-wheels). The server and the wheel cannot share one cmake build (the wheel links
# libllama as a shared library for ctypes, the server is static so that it is ONE binary), but they
# share one download of the sdist.
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

SERVER_BIN="$WHEELHOUSE/llama-server-$LLAMA_VERSION-linux_$ARCH"

BUILD_DIR="$(mktemp -d)"
trap 'rm -rf "$BUILD_DIR"' EXIT
SDIST=""
fetch_sdist() {  # the llama-cpp-python sdist (it vendors llama.cpp), downloaded once per run
  if [ -z "$SDIST" ]; then
    "$PY" -m pip download -q --no-binary :all: --no-deps -d "$BUILD_DIR/sdist" "llama-cpp-python==$LLAMA_VERSION"
    SDIST="$(ls "$BUILD_DIR"/sdist/llama_cpp_python-"$LLAMA_VERSION".tar.gz)"
  fi
}

WHEEL="$(find_wheel)"
if [ -z "$WHEEL" ]; then
  echo "install-native: building llama-cpp-python==$LLAMA_VERSION wheel for linux_$ARCH (takes a few minutes)" >&2
  fetch_sdist
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL=2 \
    "$PY" -m pip wheel -q --no-deps --no-binary llama-cpp-python \
      -w "$BUILD_DIR" "$SDIST"
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

if [ ! -x "$SERVER_BIN" ]; then
  echo "install-native: building llama-server from llama-cpp-python==$LLAMA_VERSION's vendored llama.cpp (CPU, static; ~6 min)" >&2
  fetch_sdist
  tar -xzf "$SDIST" -C "$BUILD_DIR"
  SRC="$BUILD_DIR/llama_cpp_python-$LLAMA_VERSION/vendor/llama.cpp"
  # CPU only, portable (GGML_NATIVE=OFF), static (one binary), no network at build or run time:
  # no OpenSSL/curl, no web UI (neither built with npm nor downloaded)
  GEN=(); command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
  cmake -S "$SRC" -B "$BUILD_DIR/server" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_BLAS=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF \
    >"$BUILD_DIR/server-configure.log" 2>&1 || { tail -n 40 "$BUILD_DIR/server-configure.log" >&2; exit 1; }
  cmake --build "$BUILD_DIR/server" --target llama-server -j 2 >"$BUILD_DIR/server-build.log" 2>&1 \
    || { tail -n 40 "$BUILD_DIR/server-build.log" >&2; exit 1; }
  # move into place atomically, like the wheel
  cp "$BUILD_DIR/server/bin/llama-server" "$WHEELHOUSE/.tmp.$(basename "$SERVER_BIN")"
  mv "$WHEELHOUSE/.tmp.$(basename "$SERVER_BIN")" "$SERVER_BIN"
else
  echo "install-native: reusing $SERVER_BIN" >&2
fi
# the contract of tests/llama_server_support.py: the server sits beside the venv's python
install -m 0755 "$SERVER_BIN" "$VENV/bin/llama-server"
"$VENV/bin/llama-server" --version 2>&1 | grep -i "version" >&2 || { echo "install-native: llama-server does not run" >&2; exit 1; }

"$PY" -m pip install -q "$WHEEL" "gguf>=0.17" "llguidance>=1.7.6" "jsonschema>=4.20"
"$PY" -c 'import llama_cpp, gguf, llguidance, jsonschema; print("install-native: llama_cpp", llama_cpp.__version__, "gguf, llguidance, jsonschema ok")'
