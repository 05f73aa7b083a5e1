#!/usr/bin/env bash
# Install the server-adapter test environment (vLLM + SGLang, import-only, CPU) into a venv:
#
#   bash .ci/install-adapters.sh VENV_DIR
#
# Order matters and is the whole point of this script:
#   1. torch 2.13.0 CPU build (the wheel lies on this machine's disk; never let pip pick a CUDA torch),
#   2. the pinned import-only set ../shared/integrations/requirements-adapters-cpu.txt with --no-deps
#      (vllm, sglang and xgrammar must NEVER be installed with their dependencies: they pull CUDA torch),
#   3. kimi_chat itself (editable, --no-deps) and the few packages its tests need, constrained to the
#      pinned set so nothing already pinned moves.
# Idempotent: a stamp file in the venv records what was installed (hash of this script + the
# requirements file); a run whose stamp matches and whose imports work does nothing. pip's cache is used.
# Override the requirements file with $KIMI_CHAT_ADAPTERS_REQUIREMENTS.
set -euo pipefail

VENV="${1:?usage: install-adapters.sh VENV_DIR}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REQS="${KIMI_CHAT_ADAPTERS_REQUIREMENTS:-$ROOT/../shared/integrations/requirements-adapters-cpu.txt}"
TORCH_VERSION=2.13.0
[ -f "$REQS" ] || { echo "install-adapters: requirements file not found: $REQS" >&2; exit 2; }

if [ ! -x "$VENV/bin/python" ]; then
  echo "install-adapters: creating venv $VENV" >&2
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)
# pip's expected noise: this machine's empty local index dirs, and the unmet/pinned-over requirements
# of vllm and sglang (installed --no-deps on purpose). Errors still fail the script (pipefail).
pip_quiet() {
  "${PIP[@]}" "$@" 2>&1 | { grep -v -E 'is ignored: it is neither a file nor a directory|which is not installed\.|which is incompatible\.|dependency resolver does not currently take' || true; }
}

check_imports() {
  "$PY" -W ignore - <<'PYEOF'
import torch
assert torch.version.cuda is None, f"a CUDA torch is installed ({torch.__version__}); reinstall the CPU build"
import vllm.tool_parsers, vllm.reasoning            # noqa: F401
import sglang.srt.function_call.function_call_parser  # noqa: F401
import sglang.srt.parser.reasoning_parser              # noqa: F401
import kimi_chat, tiktoken, pytest, hypothesis, tokenizers, transformers, llguidance, jsonschema  # noqa: F401
import vllm, sglang
print(f"install-adapters: ok (torch {torch.__version__}, vllm {vllm.__version__}, sglang {sglang.__version__}, kimi_chat {kimi_chat.__file__})")
PYEOF
}

STAMP="$VENV/.kimi-chat-adapters.stamp"
WANT="$(cat "$0" "$REQS" | sha256sum | cut -d' ' -f1) $ROOT"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && check_imports 2>/dev/null; then
  exit 0
fi

# 1. torch, CPU build. `torch==2.13.0` alone resolves to the local +cpu wheel on this machine (local
# versions sort above the public one); we insist on it and check that no CUDA build slipped in.
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') and torch.version.cuda is None else 1)" 2>/dev/null; then
  echo "install-adapters: installing torch==$TORCH_VERSION (CPU)" >&2
  pip_quiet install -q "torch==$TORCH_VERSION+cpu" \
    || pip_quiet install -q "torch==$TORCH_VERSION"
fi
"$PY" -W ignore -c "import torch, sys; sys.exit(0 if torch.version.cuda is None else 1)" 2>/dev/null \
  || { echo "install-adapters: torch in $VENV is a CUDA build; refusing to go on" >&2; exit 1; }

# 2. the pinned, import-only framework set, without dependencies
echo "install-adapters: installing the pinned framework set (--no-deps) from $REQS" >&2
pip_quiet install -q --no-deps -r "$REQS"

# 3. kimi_chat (editable, no deps) + what its code and tests import, pinned by the set above.
pip_quiet install -q --no-deps -e "$ROOT"
pip_quiet install -q -c "$REQS" "torch==$TORCH_VERSION" \
  "pydantic>=2.6,<3" "regex>=2023.0" "jinja2>=3.1.6" "typing_extensions" \
  "tiktoken>=0.7" "pytest>=8" "hypothesis>=6.100" "tokenizers>=0.20" "transformers" \
  "llguidance>=1.7.6,<1.8" "jsonschema"  # kimi_chat's constraint; vLLM 0.33 pins llguidance <1.8

check_imports
echo "$WANT" > "$STAMP"
