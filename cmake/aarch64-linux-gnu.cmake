# Cross-compiling for 64-bit ARM (Raspberry Pi 4/5, Apple-class NEON boards)
# with Debian's aarch64 toolchain and multiarch libraries (dpkg
# --add-architecture arm64; scripts/test --arm64 installs them). The tests run
# under qemu-user, so NEON kernels are checked on an x86 machine.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Headers are shared between architectures in /usr/include; libraries and
# their .pc files are in the arm64 multiarch directories.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
# The arm64 multiarch libc (libc6:arm64) puts the loader at
# /lib/ld-linux-aarch64.so.1, so qemu needs no -L prefix. With
# -L /usr/aarch64-linux-gnu (the cross toolchain's own libc) the first thread a
# test starts hangs.
# The CPU emulated is a Raspberry Pi 5's (Cortex-A76: NEON with the dot-product
# extension, no SVE), the ARM board most home labs have; qemu's default "max"
# adds SVE and SVE2, whose emulation is several times slower.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -cpu cortex-a76)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
