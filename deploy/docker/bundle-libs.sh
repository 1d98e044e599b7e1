#!/usr/bin/env bash
# bundle-libs.sh BINARY DEST: makes BINARY portable to another glibc-based
# image (the CUDA worker image is Ubuntu-based; the agent is built on Debian 12).
# Copies BINARY to DEST/bin and every shared library it loads to DEST/lib,
# except the system runtime that the target image provides: glibc (libc, libm,
# libpthread, libdl, librt, libresolv, the loader) and the C++ runtime
# (libstdc++, libgcc_s; Debian 12's libstdc++ itself needs glibc 2.36, newer
# than Ubuntu 22.04's 2.35). Points the binary (DT_RPATH, which also covers
# indirect dependencies) and each library (RUNPATH $ORIGIN) at DEST/lib.
# Prints the newest symbol versions the bundle needs from the target's glibc
# and libstdc++ ("needs GLIBC_2.34 GLIBCXX_3.4.30"): the target must have them.
set -euo pipefail
binary="$1" dest="$2"
command -v patchelf > /dev/null || { echo "bundle-libs.sh: needs patchelf" >&2; exit 1; }
name="$(basename "$binary")"
mkdir -p "$dest/bin" "$dest/lib"
install -m 0755 "$binary" "$dest/bin/$name"
ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r soname path; do
  case "$soname" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libresolv.so.*|libutil.so.*|libanl.so.*|\
    libmvec.so.*|libnss_*|ld-linux*.so.*|libstdc++.so.*|libgcc_s.so.*) continue ;;
  esac
  install -m 0644 "$(readlink -f "$path")" "$dest/lib/$soname"
done
# shellcheck disable=SC2016  # $ORIGIN is for the dynamic loader, not the shell
patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$dest/bin/$name"
# shellcheck disable=SC2016
for lib in "$dest"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$lib"; done
# Every library must now resolve inside the bundle or to the system runtime.
unresolved=$(env -u LD_LIBRARY_PATH ldd "$dest/bin/$name" | grep "not found" || true)
[[ -z "$unresolved" ]] || { echo "$unresolved" >&2; exit 1; }
# Symbol versions the bundle takes from outside (undefined references only).
needs() { objdump -T "$dest/bin/$name" "$dest"/lib/*.so* 2>/dev/null | awk '/\*UND\*/' |
          grep -o "$1_[0-9][0-9.]*" | sort -uV | tail -1; }
echo "bundle-libs.sh: $name + $(find "$dest/lib" -name '*.so*' | wc -l) libraries in $dest" \
     "($(du -sh "$dest" | cut -f1)); needs $(needs GLIBC) $(needs GLIBCXX) $(needs CXXABI)"
