# The Debian package of gpuwerk (docs/deploy.md "The package"), made by CPack's DEB generator:
#   /usr/bin/gpuwerk (the dashboard is embedded in it), the systemd units of the server, the agent
#   and the relay (installed disabled), example configuration files and the operator's docs; its
#   maintainer scripts make the `gpuwerk` system user and /etc/gpuwerk and never start a unit.
# scripts/package.sh builds it from a release build; tests/package/package_test.sh from any build
# tree (`cpack --config <build>/CPackConfig.cmake`). Installing the package never builds: the
# install rules do not depend on `all` (build the `gpuwerk` target first).
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY TRUE)

set(pkg ${PROJECT_SOURCE_DIR}/packaging)
install(TARGETS gpuwerk RUNTIME DESTINATION bin)
install(FILES ${pkg}/systemd/gpuwerk-server.service ${pkg}/systemd/gpuwerk-agent.service
              ${pkg}/systemd/gpuwerk-relay.service
        DESTINATION lib/systemd/system)
install(FILES ${pkg}/examples/server.conf ${pkg}/examples/agent.conf ${pkg}/examples/relay.conf
        DESTINATION share/doc/gpuwerk/examples)
install(FILES ${PROJECT_SOURCE_DIR}/docs/deploy.md ${PROJECT_SOURCE_DIR}/docs/configuration.md
              ${PROJECT_SOURCE_DIR}/docs/database.md ${PROJECT_SOURCE_DIR}/docs/scale-out.md
              ${PROJECT_SOURCE_DIR}/docs/ssh.md
        DESTINATION share/doc/gpuwerk)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpuwerk)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "gpuwerk operators <root@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "self-hostable GPU cloud: server, host agent and SSH relay")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "gpuwerk rents GPU hosts by the minute as containerised sandboxes reached over SSH. One binary "
    "holds the control plane with its web dashboard (gpuwerk server), the host agent (gpuwerk "
    "agent), the SSH relay (gpuwerk relay) and the command-line client. The systemd units are "
    "installed disabled; see /usr/share/doc/gpuwerk/deploy.md.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
# zstd (dpkg >= 1.21.18, bookworm) packs a large binary in seconds where gzip takes minutes.
set(CPACK_DEBIAN_COMPRESSION_TYPE zstd)
# Without debug information: /usr/bin/gpuwerk of a release build.
set(CPACK_STRIP_FILES ON)
# Shared libraries from dpkg-shlibdeps; what the binary runs besides: adduser (postinst),
# ssh-keygen (the relay signs its certificates with it; the CLI's key claims), iptables (the
# agent's instance network isolation), a container engine for the agent.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser, openssh-client")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "iptables")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql, docker.io | podman")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${pkg}/debian/postinst ${pkg}/debian/prerm ${pkg}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
