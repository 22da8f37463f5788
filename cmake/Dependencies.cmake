# Every dependency is a Debian 12 package (scripts/install-deps.sh installs them).
# Each one is here on purpose; docs/architecture.md says why.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED)            # parallel-for over kernel tiles
find_package(nlohmann_json 3.10 REQUIRED) # JSON (SAX parser keeps key order and number spelling)
find_package(CLI11 REQUIRED)              # command line
find_package(fmt REQUIRED)
find_package(OpenSSL REQUIRED)            # SHA-256 for SHA256SUMS
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)   # tokenizer pre-tokenizer regex (JIT)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc) # NFC normalizer
pkg_check_modules(WEBP REQUIRED IMPORTED_TARGET libwebp)
# FFmpeg (Debian's libav*): video containers (MP4, WebM, MKV) and codecs (H.264, VP8/9, AV1
# where the Debian build has a decoder), frame conversion to RGB24 (libswscale).
# -DSTAVE_VIDEO=OFF builds without it (STAVE_LIBAV_LIBS is then empty).
set(STAVE_LIBAV_LIBS "")
if(STAVE_VIDEO)
  pkg_check_modules(LIBAV REQUIRED IMPORTED_TARGET libavformat libavcodec libswscale libavutil)
  # Debian's .pc files name the multiarch folder (/usr/include/<triplet>), which is already on the
  # compiler's search path; dropping it keeps every compile command, and so ccache's hits, unchanged.
  get_target_property(_libav_include PkgConfig::LIBAV INTERFACE_INCLUDE_DIRECTORIES)
  if(_libav_include)
    list(FILTER _libav_include EXCLUDE REGEX "^/usr/include(/[^/]+-linux-gnu[^/]*)?/?$")
    set_target_properties(PkgConfig::LIBAV PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_libav_include}")
  endif()
  set(STAVE_LIBAV_LIBS PkgConfig::LIBAV)
endif()

# Boost.Beast + Boost.Asio (header-only): the event-driven HTTP/1.1 server of stave serve.
find_package(Boost 1.74 REQUIRED)
find_path(HTTPLIB_INCLUDE_DIR httplib.h REQUIRED)
# Debian builds cpp-httplib as a shared library: its header must be compiled with the package's
# flags (CPPHTTPLIB_OPENSSL/ZLIB/BROTLI_SUPPORT change class layouts), which this target carries.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)  # HTTP client of the serve tests and bench
find_path(STB_INCLUDE_DIR stb/stb_image.h)
# libcsv (libcsv-dev, no pkg-config file): RFC 4180 CSV for `stave eval-data classify`.
find_path(CSV_INCLUDE_DIR csv.h REQUIRED)
find_library(CSV_LIBRARY csv REQUIRED)

if(STAVE_TESTS)
  find_package(GTest REQUIRED)
endif()
if(STAVE_BENCH)
  find_package(benchmark REQUIRED)
endif()
