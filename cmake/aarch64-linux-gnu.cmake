# Cross-building for aarch64 Linux on a Debian x86-64 host (scripts/cross-test.sh): Debian's
# cross compiler (g++-aarch64-linux-gnu) and the arm64 -dev packages installed side by side with
# the host's (multiarch: /usr/lib/aarch64-linux-gnu). Test binaries run under qemu-user-static
# (CMAKE_CROSSCOMPILING_EMULATOR), which finds the arm64 loader and libraries at their multiarch
# paths, so no sysroot is needed.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)

# Headers and libraries: the arm64 multiarch directories, never the host's. Programs (python3,
# node) stay the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
