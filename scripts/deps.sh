# Sourced by scripts/setup and scripts/test: installs the Debian packages the
# build needs, running apt-get only when one of them is missing.
TESSERA_PACKAGES=(
  g++ cmake make pkg-config
  libgtest-dev libgmock-dev
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libpcre2-dev libxxhash-dev
  libhwy-dev libtomlplusplus-dev
  libsodium-dev
  clang libclang-rt-14-dev
)

tessera_install_deps() {
  local missing=()
  local p
  for p in "${TESSERA_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
