# gpuwerk_library(NAME n SRCS a.cc ... DEPS gpuwerk::x ... [HEADER_ONLY])
# Defines the library gpuwerk_<n> with the alias gpuwerk::<n>, includes rooted at src/.
function(gpuwerk_library)
  cmake_parse_arguments(L "" "NAME" "SRCS;DEPS" ${ARGN})
  add_library(gpuwerk_${L_NAME} STATIC ${L_SRCS})
  add_library(gpuwerk::${L_NAME} ALIAS gpuwerk_${L_NAME})
  target_include_directories(gpuwerk_${L_NAME} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(gpuwerk_${L_NAME} PUBLIC ${L_DEPS})
endfunction()

# The ctest fixture every test labelled `postgresql` requires: one PostgreSQL server for the
# whole ctest run (tests/support/postgres_test_server.cc, registered in tests/CMakeLists.txt),
# whose URL the tests read from this file (tests/support/postgres_server.h).
set(GPUWERK_TEST_POSTGRES_STATE "${PROJECT_BINARY_DIR}/test-postgres/shared")

# gpuwerk_test(NAME n SRCS a_test.cc ... DEPS gpuwerk::x ... [LABELS l ...] [POSTGRES])
# A GoogleTest binary registered with CTest test by test. POSTGRES (tests whose store is
# tests/support/temp_database.h) registers the whole binary once more as `n_on_postgresql`
# (label `postgresql`), run with GPUWERK_TEST_DATABASE=postgresql. A binary whose LABELS include
# `postgresql` (it uses PostgreSQL itself, e.g. store_contract_test) and every `n_on_postgresql`
# use the run's one shared server (the `postgres_server` fixture; docs/database.md "Tests").
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
  if("postgresql" IN_LIST T_LABELS)
    # Set after discovery, by a script ctest includes after the discovered tests' own: several
    # labels do not survive gtest_discover_tests' PROPERTIES (a list passed on a command line).
    set(script "${CMAKE_CURRENT_BINARY_DIR}/${T_NAME}_postgresql.cmake")
    file(WRITE "${script}" "if(${T_NAME}_TESTS)
  set_tests_properties(\${${T_NAME}_TESTS} PROPERTIES
    LABELS \"${T_LABELS}\"
    FIXTURES_REQUIRED postgres_server
    ENVIRONMENT \"GPUWERK_TEST_POSTGRES_URL_FILE=${GPUWERK_TEST_POSTGRES_STATE}/url\")
endif()
")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
  endif()
  if(T_POSTGRES)
    add_test(NAME ${T_NAME}_on_postgresql COMMAND ${T_NAME})
    set_tests_properties(${T_NAME}_on_postgresql PROPERTIES
      LABELS "${T_LABELS};postgresql"
      FIXTURES_REQUIRED postgres_server
      ENVIRONMENT "GPUWERK_TEST_DATABASE=postgresql;GPUWERK_TEST_POSTGRES_URL_FILE=${GPUWERK_TEST_POSTGRES_STATE}/url")
  endif()
endfunction()
