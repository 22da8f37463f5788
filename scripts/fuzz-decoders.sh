#!/usr/bin/env bash
# Builds the image decoders that stave links (libpng, libjpeg-turbo, libwebp) from Debian's
# own source packages with the fuzzing flags (clang, libFuzzer coverage, ASan + UBSan), as
# static libraries under PREFIX, so that fuzz_image sees and checks the decoders' code and not
# only our wrappers. scripts/fuzz.sh calls it and configures the fuzz build with
# CMAKE_PREFIX_PATH=PREFIX. The sources are the versions apt would install (apt-get source),
# so the fuzzed code is the code users run. A finished build is kept: a second run with the
# same package versions does nothing.
# Needs: deb-src lines for the Debian archive (added to /etc/apt/sources.list.d/ when missing,
# as root), dpkg-dev, cmake, clang.
# Usage: scripts/fuzz-decoders.sh PREFIX
set -euo pipefail
prefix="${1:?usage: fuzz-decoders.sh PREFIX}"
mkdir -p "$prefix"
prefix="$(cd "$prefix" && pwd)"
jobs="${FUZZ_JOBS:-2}"
export CC="${CC:-clang}" CXX="${CXX:-clang++}"
# Everything of ASan and UBSan but two arithmetic checks: the decoders' transforms compute on
# coefficients straight from the file, and crafted ones overflow `int` or shift negative values
# (libwebp's dsp/dec.c was the first finding). Those wrap to wrong pixels on every compiler we
# use and upstream treats them as benign; memory errors, which ASan checks, are what matters.
flags="-O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
-fno-sanitize=signed-integer-overflow,shift-base -fno-sanitize-recover=all"
packages=(libpng1.6 libjpeg-turbo libwebp)

have_deb_src() { apt-cache showsrc libpng1.6 >/dev/null 2>&1 && [ -n "$(apt-cache showsrc libpng1.6 2>/dev/null)" ]; }
if ! have_deb_src; then
  # Debian 12 images ship deb822 sources with "Types: deb" only: add the same archives for
  # sources. Nothing is changed when deb-src lines exist already.
  src=/etc/apt/sources.list.d/debian.sources
  if [ "$(id -u)" != 0 ] || [ ! -f "$src" ]; then
    echo "fuzz-decoders: apt has no deb-src lines; add them (see docs/fuzzing.md) or run as root" >&2
    exit 1
  fi
  sed 's/^Types: deb$/Types: deb-src/' "$src" >/etc/apt/sources.list.d/stave-deb-src.sources
  apt-get update -qq
fi

# The newest source version each archive lists (a security update's source may be missing
# from a mirror: then the next one down), fetched into SRC; the versions are the cache key.
versions=""
fetch() {  # PACKAGE: downloads and unpacks the newest fetchable source version into the cwd
  local p="$1" v
  for v in $(apt-cache showsrc "$p" | sed -n 's/^Version: //p' | sort -rVu); do
    if apt-get source -qq "$p=$v" >/dev/null 2>&1; then
      versions+="$p=$v "
      return 0
    fi
  done
  echo "fuzz-decoders: cannot fetch the source of $p" >&2
  return 1
}
listed="$(apt-cache showsrc "${packages[@]}" | sed -n 's/^Version: //p' | sort -u | tr '\n' ' ')"
stamp="$prefix/.built"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$listed$flags" ]; then
  echo "fuzz-decoders: $prefix is up to date ($(cat "$prefix/.versions"))"
  exit 0
fi

work="$prefix/src"
rm -rf "$work" "$prefix/lib" "$prefix/include"
mkdir -p "$work" "$prefix/lib" "$prefix/include"
cd "$work"
for p in "${packages[@]}"; do fetch "$p"; done

# libpng: the reading half only, compiled directly (its build system would also make tools);
# the prebuilt pnglibconf.h is the library's default configuration.
png="$(find "$work" -maxdepth 1 -type d -name 'libpng1.6-*' | head -n 1)"
mkdir -p "$work/png-build"
cp "$png/scripts/pnglibconf.h.prebuilt" "$png/pnglibconf.h"
for f in png pngerror pngget pngmem pngpread pngread pngrio pngrtran pngrutil pngset pngtrans pngwio pngwrite pngwtran pngwutil; do
  echo "$CC $flags -I$png -c $png/$f.c -o $work/png-build/$f.o"
done | xargs -P "$jobs" -I{} sh -c '{}'
ar rcs "$prefix/lib/libpng16.a" "$work"/png-build/*.o
ln -sf libpng16.a "$prefix/lib/libpng.a"
cp "$png/png.h" "$png/pngconf.h" "$png/pnglibconf.h" "$prefix/include/"

# libjpeg-turbo: portable C code paths (no SIMD: assembly has no coverage and no ASan checks).
jpeg="$(find "$work" -maxdepth 1 -type d -name 'libjpeg-turbo-*' | head -n 1)"
cmake -S "$jpeg" -B "$work/jpeg-build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="$flags" \
  -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_SIMD=OFF -DWITH_TURBOJPEG=OFF -DWITH_JAVA=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
ninja -C "$work/jpeg-build" -j "$jobs" jpeg-static >/dev/null
cp "$work/jpeg-build/libjpeg.a" "$prefix/lib/"
cp "$jpeg/jpeglib.h" "$jpeg/jmorecfg.h" "$jpeg/jerror.h" "$work/jpeg-build/jconfig.h" "$prefix/include/"

# libwebp: the decoder library (WebPDecode, WebPGetFeatures) with its pkg-config file.
webp="$(find "$work" -maxdepth 1 -type d -name 'libwebp-*' | head -n 1)"
cmake -S "$webp" -B "$work/webp-build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS="$flags" \
  -DBUILD_SHARED_LIBS=OFF -DWEBP_BUILD_ANIM_UTILS=OFF -DWEBP_BUILD_CWEBP=OFF -DWEBP_BUILD_DWEBP=OFF \
  -DWEBP_BUILD_GIF2WEBP=OFF -DWEBP_BUILD_IMG2WEBP=OFF -DWEBP_BUILD_VWEBP=OFF -DWEBP_BUILD_WEBPINFO=OFF \
  -DWEBP_BUILD_WEBPMUX=OFF -DWEBP_BUILD_EXTRAS=OFF -DWEBP_ENABLE_SIMD=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
ninja -C "$work/webp-build" -j "$jobs" webpdecoder >/dev/null
cp "$work/webp-build/libwebpdecoder.a" "$prefix/lib/libwebp.a"
mkdir -p "$prefix/include/webp" "$prefix/lib/pkgconfig"
cp "$webp"/src/webp/decode.h "$webp"/src/webp/types.h "$prefix/include/webp/"
cat >"$prefix/lib/pkgconfig/libwebp.pc" <<EOF
prefix=$prefix
Name: libwebp
Description: libwebp decoder built for fuzzing (scripts/fuzz-decoders.sh)
Version: $(sed -n 's/^libwebp=\([^ ]*\).*/\1/p' <<<"${versions// /$'\n'}")
Libs: -L\${prefix}/lib -lwebp -lm -pthread
Cflags: -I\${prefix}/include
EOF
rm -rf "$work"
echo "$versions" >"$prefix/.versions"
echo "$listed$flags" >"$stamp"
echo "fuzz-decoders: built $versions into $prefix"
