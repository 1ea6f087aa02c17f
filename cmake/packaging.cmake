# `cmake --install` and CPack's .deb: the tessera binary, its man page
# (generated from --help by help2man when present), and the systemd units of
# a worker and a server with their settings files (packaging/).
include(GNUInstallDirs)
install(TARGETS tessera RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

find_program(HELP2MAN help2man)
if(HELP2MAN)
  # Every subcommand's options, from the binary itself (--help-all).
  # Compressed without a timestamp (gzip -n), as Debian installs man pages.
  set(man_page ${CMAKE_BINARY_DIR}/tessera.1.gz)
  add_custom_command(OUTPUT ${man_page}
    COMMAND ${HELP2MAN} --no-info --no-discard-stderr --help-option=--help-all --version-option=--version
            --name "run one large language model on several small machines" --section 1
            --output ${CMAKE_BINARY_DIR}/tessera.1 $<TARGET_FILE:tessera>
    COMMAND gzip -9nf ${CMAKE_BINARY_DIR}/tessera.1
    DEPENDS tessera
    COMMENT "Generating the man page from tessera --help-all")
  add_custom_target(man_page ALL DEPENDS ${man_page})
  install(FILES ${man_page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man page (scripts/setup installs it)")
endif()

# Units under lib/systemd/system of the prefix (/usr for the .deb, on
# Debian 12's merged /usr; /usr/local/lib/systemd/system is on systemd's path
# too), naming the binary where this prefix installs it; their settings in
# /etc/default, kept as configuration files.
set(TESSERA_INSTALLED_BINARY ${CMAKE_INSTALL_FULL_BINDIR}/tessera)
foreach(unit tessera-worker.service tessera-serve.service)
  configure_file(packaging/systemd/${unit}.in ${CMAKE_BINARY_DIR}/${unit} @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/${unit} DESTINATION lib/systemd/system)
endforeach()
install(FILES packaging/default/tessera-worker packaging/default/tessera-serve DESTINATION /etc/default)
install(FILES README.md LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR} OPTIONAL)

set(CPACK_GENERATOR DEB)
# The package installs where this build's units say the binary is
# (configure with -DCMAKE_INSTALL_PREFIX=/usr for a Debian package).
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_PACKAGE_NAME tessera)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Tessera developers <tessera@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "run one large language model on several small machines at once")
set(CPACK_PACKAGE_DESCRIPTION "Tessera runs a GGUF model across the CPUs (and GPUs) of several machines: tensor parallel,
pipeline and hybrid plans, speculative decoding, sealed links, keyed discovery, and the tools of llama.cpp (run,
chat, an OpenAI-compatible serve, bench, perplexity, quantize). A worker on every board: tessera-worker.service.")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Depends from the libraries the binary links (dpkg-shlibdeps); the Vulkan
# loader only where the build has the backend.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_SOURCE_DIR}/packaging/debian/conffiles
                                      ${CMAKE_SOURCE_DIR}/packaging/debian/postinst
                                      ${CMAKE_SOURCE_DIR}/packaging/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
