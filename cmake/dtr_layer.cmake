# dtr_layer(<name> SOURCES <files...> [PUBLIC_HEADERS <dtr/header.h...>] [DEPENDS <layers...>] [LINK <libraries...>])
#
# One layer of libdtr (docs/architecture.md): the folder <name>/, compiled as an object library that sees only
# its own headers and those of the layers it DEPENDS on, so that an include of a higher layer's header does not
# build. The headers are reached through a tree in the build folder (layers/<name>/) holding links to the
# layer's folder and to its public headers in include/, spelt as everywhere else ("runtime/lineage.h",
# "dtr/runtime.h"). Every layer's objects go into the one libdtr users link.
#
# dtr_<name>_headers is the layer's include interface (tests and benchmarks that read internals link it).
function(dtr_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;PUBLIC_HEADERS;DEPENDS;LINK")
  set(tree "${PROJECT_BINARY_DIR}/layers/${name}")
  file(REMOVE_RECURSE "${tree}")
  file(MAKE_DIRECTORY "${tree}/include/dtr")
  file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${name}" "${tree}/${name}" SYMBOLIC)
  foreach(header IN LISTS arg_PUBLIC_HEADERS)
    if(NOT EXISTS "${PROJECT_SOURCE_DIR}/include/${header}")
      message(FATAL_ERROR "dtr_layer(${name}): no public header include/${header}")
    endif()
    get_filename_component(header_dir "${tree}/include/${header}" DIRECTORY)
    file(MAKE_DIRECTORY "${header_dir}")
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/include/${header}" "${tree}/include/${header}" SYMBOLIC)
  endforeach()

  add_library(dtr_${name}_headers INTERFACE)
  target_include_directories(dtr_${name}_headers INTERFACE "${tree}" "${tree}/include")
  foreach(lower IN LISTS arg_DEPENDS)
    target_link_libraries(dtr_${name}_headers INTERFACE dtr_${lower}_headers)
  endforeach()

  add_library(dtr_${name} OBJECT ${arg_SOURCES})
  target_link_libraries(dtr_${name} PRIVATE dtr_${name}_headers ${arg_LINK} fmt::fmt spdlog::spdlog
    nlohmann_json::nlohmann_json Threads::Threads)
  target_compile_features(dtr_${name} PRIVATE cxx_std_20)
  # -fno-semantic-interposition: libdtr's calls to its own functions bind within it (nothing interposes them),
  # so the compiler may inline them; in a shared library it otherwise may not (docs/results/runtime-overhead.md).
  target_compile_options(dtr_${name} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${DTR_WARNINGS};-fno-semantic-interposition>"
    # Device code: nvcc's own warnings and the host compiler's are errors too.
    "$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings;-Xcompiler=-Wall,-Wextra>")
  if(DTR_FUZZ_COVERAGE)  # libFuzzer's coverage of libdtr's code (fuzz/CMakeLists.txt)
    target_compile_options(dtr_${name} PRIVATE "$<$<COMPILE_LANGUAGE:CXX>:${DTR_FUZZ_COVERAGE}>")
  endif()
  # Objects, not the target, go into libdtr: the installed library's link interface names no layer.
  target_sources(dtr PRIVATE $<TARGET_OBJECTS:dtr_${name}>)
  if(arg_LINK)
    target_link_libraries(dtr PRIVATE ${arg_LINK})
  endif()
endfunction()
