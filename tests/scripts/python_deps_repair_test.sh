#!/usr/bin/env bash
# scatterx_python_deps (scripts/common.sh) checks that torch imports after
# installing it: one cut short (here a stand-in whose import raises OSError,
# with no dist-info, as a full disk leaves it) is installed again, and if that
# fails too it is removed, so that pytest skips the torch tests instead of
# erroring on them. pip is a stand-in; nothing is downloaded.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/build"
python3 -m venv --without-pip "$tmp/build/venv"
site=$("$tmp/build/venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
fail() { echo "python_deps_repair_test: $1"; cat "$tmp/log"; exit 1; }

broken_torch() {
  mkdir -p "$site/torch"
  echo 'raise OSError("libtorch_global_deps.so: cannot open shared object file")' >"$site/torch/__init__.py"
}
# $1: what the stand-in pip's reinstall does: "repairs" or "fails".
run_deps() {
  local reinstall=$1
  (
    source "$root/scripts/common.sh"
    SCATTERX_ROOT=$tmp
    SCATTERX_VENV=$tmp/build/venv
    scatterx_pip() {
      echo "pip $*"
      case "$*" in
        *--force-reinstall*torch*)
          [ "$reinstall" = repairs ] || return 1
          echo 'def zeros(n): return [0] * n' >"$site/torch/__init__.py"
          ;;
        "install torch") return 1 ;;
      esac
    }
    scatterx_python_deps torch pyg
  ) >"$tmp/log" 2>&1
}

broken_torch
run_deps fails || fail "scatterx_python_deps failed"
[ ! -e "$site/torch" ] || fail "expected the broken torch to be removed"
grep -q "torch could not be installed" "$tmp/log" || fail "expected the log to say torch could not be installed"
grep -q "torch_geometric" "$tmp/log" && fail "expected no torch_geometric install without torch"

broken_torch
run_deps repairs || fail "scatterx_python_deps failed"
"$tmp/build/venv/bin/python" -c "import torch; torch.zeros(1)" || fail "expected the reinstalled torch to import"
grep -q "installing it again" "$tmp/log" || fail "expected the log to report the second install"
grep -q "pip install torch_geometric" "$tmp/log" || fail "expected torch_geometric to be installed once torch imports"
echo "python_deps_repair_test: a broken torch is removed, or repaired by the second install"
