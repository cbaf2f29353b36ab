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
  # An instrumented libdtr needs an instrumented program: the sanitizer runtime must load first.
  set(flags "-fsanitize=${DTR_SANITIZE}")
endif()
run(${CMAKE_COMMAND} -S "${DTR_CONSUMER_SOURCE}" -B "${DTR_SCRATCH}/build" -G "${DTR_GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${DTR_SCRATCH}/prefix" "-DCMAKE_C_FLAGS=${flags}" "-DCMAKE_CXX_FLAGS=${flags}"
    "-DCMAKE_EXE_LINKER_FLAGS=${flags}")
run(${CMAKE_COMMAND} --build "${DTR_SCRATCH}/build")
run("${DTR_SCRATCH}/build/dtr-consumer")
run("${DTR_SCRATCH}/build/dtr-consumer-c")
