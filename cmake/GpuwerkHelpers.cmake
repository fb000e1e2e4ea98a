# gpuwerk_library(NAME n SRCS a.cc ... DEPS gpuwerk::x ... [HEADER_ONLY])
# Defines the library gpuwerk_<n> with the alias gpuwerk::<n>, includes rooted at src/.
function(gpuwerk_library)
  cmake_parse_arguments(L "" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(gpuwerk_${L_NAME} STATIC ${L_SRCS})
  add_library(gpuwerk::${L_NAME} ALIAS gpuwerk_${L_NAME})
  target_include_directories(gpuwerk_${L_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(gpuwerk_${L_NAME} PUBLIC ${L_DEPS})
endfunction()

# gpuwerk_test(NAME n SRCS a_test.cc ... DEPS gpuwerk::x ... [LABELS l ...] [POSTGRES])
# A GoogleTest binary registered with CTest test by test. POSTGRES (tests whose store is
# tests/support/temp_database.h) registers the whole binary once more as `n_on_postgresql`
# (label `postgresql`), run with GPUWERK_TEST_DATABASE=postgresql: one process, so one
# PostgreSQL server for all its tests (docs/database.md "Tests").
function(gpuwerk_test)
  if(NOT GPUWERK_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "POSTGRES" "NAME" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SRCS})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR})
  target_link_libraries(${T_NAME} PRIVATE ${T_DEPS} GTest::gmock GTest::gtest_main)
  # Where tests find the tree's files and built binaries (e.g. the gpuwerk CLI).
  target_compile_definitions(${T_NAME} PRIVATE
    GPUWERK_TEST_SOURCE_DIR="${PROJECT_SOURCE_DIR}" GPUWERK_TEST_BINARY_DIR="${PROJECT_BINARY_DIR}")
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  gtest_discover_tests(${T_NAME}
    PROPERTIES LABELS "${T_LABELS}"
    DISCOVERY_TIMEOUT 60)
  if(T_POSTGRES)
    add_test(NAME ${T_NAME}_on_postgresql COMMAND ${T_NAME})
    set_tests_properties(${T_NAME}_on_postgresql PROPERTIES
      LABELS "${T_LABELS};postgresql"
      ENVIRONMENT "GPUWERK_TEST_DATABASE=postgresql")
  endif()
endfunction()
