#!/usr/bin/env bash
# Install the `native-ik` extra (ik-llama-cpp-python, the ik_llama.cpp backend of
# NativeModel.load(backend="ik_llama.cpp")) into a venv.
#
#   bash .ci/install-native-ik.sh .venv
#
# ik-llama-cpp-python 0.1.5 is a prebuilt manylinux wheel (CPU, ~25 MB, cp311 only): no build.
# `pip download` puts it in the wheelhouse ($KIMI_CHAT_WHEELHOUSE, default ~/.cache/kimi-chat-wheels)
# once; later runs install from there without the network.
set -euo pipefail

VENV="${1:?usage: install-native-ik.sh VENV_DIR}"
PY="$VENV/bin/python"
[ -x "$PY" ] || { echo "install-native-ik: no python at $PY" >&2; exit 2; }

IK_VERSION=0.1.5
WHEELHOUSE="${KIMI_CHAT_WHEELHOUSE:-$HOME/.cache/kimi-chat-wheels}"
mkdir -p "$WHEELHOUSE"

find_wheel() {
  ls "$WHEELHOUSE"/ik_llama_cpp_python-"$IK_VERSION"-*.whl 2>/dev/null | head -n 1 || true
}

WHEEL="$(find_wheel)"
if [ -z "$WHEEL" ]; then
  echo "install-native-ik: downloading ik-llama-cpp-python==$IK_VERSION" >&2
  DL_DIR="$(mktemp -d)"
  trap 'rm -rf "$DL_DIR"' EXIT
  "$PY" -m pip download -q --no-deps --only-binary :all: -d "$DL_DIR" "ik-llama-cpp-python==$IK_VERSION"
  for f in "$DL_DIR"/ik_llama_cpp_python-*.whl; do
    mv "$f" "$WHEELHOUSE/.tmp.$(basename "$f")"
    mv "$WHEELHOUSE/.tmp.$(basename "$f")" "$WHEELHOUSE/$(basename "$f")"
  done
  WHEEL="$(find_wheel)"
  [ -n "$WHEEL" ] || { echo "install-native-ik: no wheel for this platform" >&2; exit 1; }
else
  echo "install-native-ik: reusing $WHEEL" >&2
fi

# --no-deps: its one dependency (numpy) comes with the native extra; pip must not touch the venv's pins
"$PY" -m pip install -q --no-deps "$WHEEL"
"$PY" -c 'import ik_llama_cpp; print("install-native-ik: ik_llama_cpp", ik_llama_cpp.__version__)'
