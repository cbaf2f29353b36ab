# Installs dtr from DTR_BUILD_DIR into a scratch prefix, then builds and runs examples/consumer against it.
file(REMOVE_RECURSE "${DTR_SCRATCH}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "failed (${status}): ${command}\n${out}")
  endif()
  message(STATUS "${out}")
endfunction()
run(${CMAKE_COMMAND} --install "${DTR_BUILD_DIR}" --prefix "${DTR_SCRATCH}/prefix")
set(flags "")
if(DTR_SANITIZE)
  # An instrumented libdtr needs an instrumented program (the sanitizer runtime must load first), built by
  # the same compiler (clang's and gcc's sanitizer runtimes differ).
  set(flags "-fsanitize=${DTR_SANITIZE}")
endif()
set(link_flags "${flags}")
if(DTR_SANITIZE AND DTR_C_COMPILER MATCHES "clang")
  # clang links a C program with the C halves of the sanitizer runtimes only; libdtr is C++ (UBSan's vptr
  # checks need the C++ halves, and they the C++ library).
  string(APPEND link_flags " -fsanitize-link-c++-runtime -lstdc++")
endif()
run(${CMAKE_COMMAND} -S "${DTR_CONSUMER_SOURCE}" -B "${DTR_SCRATCH}/build" -G "${DTR_GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${DTR_SCRATCH}/prefix" "-DCMAKE_C_COMPILER=${DTR_C_COMPILER}"
    "-DCMAKE_CXX_COMPILER=${DTR_CXX_COMPILER}" "-DCMAKE_C_FLAGS=${flags}" "-DCMAKE_CXX_FLAGS=${flags}"
    "-DCMAKE_EXE_LINKER_FLAGS=${link_flags}")
run(${CMAKE_COMMAND} --build "${DTR_SCRATCH}/build")
run("${DTR_SCRATCH}/build/dtr-consumer")
run("${DTR_SCRATCH}/build/dtr-consumer-c")
# The installed programs run from the prefix, finding the installed libdtr (an $ORIGIN-relative rpath), with
# nothing of the build tree on the library path.
if(DTR_INSTALLED_TOOLS)
  file(WRITE "${DTR_SCRATCH}/tiny.log"
    "{\"INSTRUCTION\":\"ANNOTATE\",\"ANNOTATION\":\"START\"}\n"
    "{\"INSTRUCTION\":\"CONSTANT\",\"NAME\":\"x\"}\n{\"INSTRUCTION\":\"MEMORY\",\"NAME\":\"x\",\"MEMORY\":\"4096\"}\n"
    "{\"INSTRUCTION\":\"CALL\",\"NAME\":\"f\",\"ARGS\":[\"x\"],\"RESULT\":[\"y\"],\"TIME\":\"10\"}\n"
    "{\"INSTRUCTION\":\"MEMORY\",\"NAME\":\"y\",\"MEMORY\":\"4096\"}\n{\"INSTRUCTION\":\"ALIAS\",\"NAME\":\"y\",\"ALIAS\":\"-1\"}\n")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${DTR_SCRATCH}/prefix/bin/dtr-sim"
                          "${DTR_SCRATCH}/tiny.log" --ratio 1 --json
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0 OR NOT out MATCHES "\"feasible\":true")
    message(FATAL_ERROR "the installed dtr-sim failed (${status}): ${out}${err}")
  endif()
  message(STATUS "installed dtr-sim: ${out}")
endif()
