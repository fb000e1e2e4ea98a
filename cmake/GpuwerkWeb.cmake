# The dashboard's build (docs/dashboard.md "Build"): web/ is a Vite + TypeScript + Preact app whose
# npm packages are pinned by web/package-lock.json. With GPUWERK_WEB=ON (the default) the build
# copies web/ into <build>/web, runs `npm ci` there (only when package.json or the lock changed),
# type-checks (tsc), bundles (vite build) and turns the result into a C++ source file
# (web/tools/embed.mjs), which gpuwerk::web_assets compiles into the binary. Nothing is written
# into the source tree, so several build directories never share node_modules.
#
# gpuwerk_web_assets_source(<var>): sets <var> to the generated .cc (a custom command's output).
function(gpuwerk_web_assets_source out_var)
  set(web ${PROJECT_SOURCE_DIR}/web)
  set(stage ${PROJECT_BINARY_DIR}/web)
  set(generated ${CMAKE_CURRENT_BINARY_DIR}/generated/web_assets.cc)

  find_program(GPUWERK_NODE NAMES node nodejs)
  find_program(GPUWERK_NPM NAMES npm)
  if(NOT GPUWERK_NODE OR NOT GPUWERK_NPM)
    message(FATAL_ERROR
      "The dashboard (GPUWERK_WEB=ON) is built with Node.js and npm, which were not found. "
      "Install them with `scripts/setup.sh build`, or configure with -DGPUWERK_WEB=OFF for a "
      "binary without the dashboard.")
  endif()
  execute_process(COMMAND ${GPUWERK_NODE} --version OUTPUT_VARIABLE node_version
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX REPLACE "^v" "" node_version "${node_version}")
  if(node_version VERSION_LESS 18.19)
    message(FATAL_ERROR "The dashboard's build needs Node.js 18.19 or newer; ${GPUWERK_NODE} is "
                        "${node_version}. Or configure with -DGPUWERK_WEB=OFF.")
  endif()

  file(GLOB_RECURSE sources CONFIGURE_DEPENDS
       ${web}/src/* ${web}/public/* ${web}/tools/* ${web}/e2e/*)
  set(config ${web}/index.html ${web}/vite.config.ts ${web}/tsconfig.json)

  add_custom_command(
    OUTPUT ${stage}/npm-ci.stamp
    COMMAND ${CMAKE_COMMAND} -E make_directory ${stage}
    COMMAND ${CMAKE_COMMAND} -E copy ${web}/package.json ${web}/package-lock.json ${stage}/
    COMMAND ${GPUWERK_NPM} ci --no-audit --no-fund --loglevel=error
    COMMAND ${CMAKE_COMMAND} -E touch ${stage}/npm-ci.stamp
    WORKING_DIRECTORY ${stage}
    DEPENDS ${web}/package.json ${web}/package-lock.json
    COMMENT "Installing the dashboard's pinned npm packages (npm ci)"
    VERBATIM)

  add_custom_command(
    OUTPUT ${generated} ${stage}/weight.json
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${stage}/src ${stage}/public ${stage}/tools ${stage}/e2e
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${web}/src ${stage}/src
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${web}/public ${stage}/public
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${web}/tools ${stage}/tools
    COMMAND ${CMAKE_COMMAND} -E copy_directory ${web}/e2e ${stage}/e2e
    COMMAND ${CMAKE_COMMAND} -E copy ${config} ${stage}/
    COMMAND ${GPUWERK_NODE} node_modules/typescript/bin/tsc --noEmit -p tsconfig.json
    COMMAND ${GPUWERK_NODE} node_modules/vite/bin/vite.js build --logLevel warn
    COMMAND ${GPUWERK_NODE} tools/embed.mjs dist src/routes.json ${generated} weight.json
    WORKING_DIRECTORY ${stage}
    DEPENDS ${stage}/npm-ci.stamp ${sources} ${config}
    COMMENT "Building the dashboard (tsc, vite) and embedding it"
    VERBATIM)
  set(${out_var} ${generated} PARENT_SCOPE)
endfunction()
