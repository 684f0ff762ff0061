# Shared by scripts/*.sh: install what is missing, then build a preset.
set -euo pipefail

SCATTERX_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SCATTERX_JOBS=${SCATTERX_JOBS:-$(nproc)}

# Debian packages the C++ build needs; installed only when missing.
scatterx_install_deps() {
  local wanted=(g++ cmake make libgtest-dev libbenchmark-dev python3)
  local missing=()
  for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "== installing: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

# scatterx_build <preset>: configure and build one CMake preset.
scatterx_build() {
  local preset=$1
  echo "== configure + build ($preset)"
  cmake --preset "$preset" -S "$SCATTERX_ROOT" >/dev/null
  cmake --build --preset "$preset" -j "$SCATTERX_JOBS"
}
