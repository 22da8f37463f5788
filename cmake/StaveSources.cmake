# Kernels for one instruction set live in a folder named after it, and only those files are
# compiled for that ISA; the dispatcher (src/backends/cpu/dispatch.cpp) picks at run time, so
# one binary runs on any x86-64 and uses what the CPU has.
set(STAVE_ISA_FLAGS_avx2   -mavx2 -mfma -mf16c)
set(STAVE_ISA_FLAGS_avx512 -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16)
set(STAVE_ISA_FLAGS_amx    -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16 -mamx-tile -mamx-int8 -mamx-bf16)

function(stave_apply_isa_flags)
  foreach(src IN LISTS ARGN)
    foreach(isa avx2 avx512 amx)
      if(src MATCHES "/${isa}/")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${STAVE_ISA_FLAGS_${isa}}")
      endif()
    endforeach()
  endforeach()
endfunction()
