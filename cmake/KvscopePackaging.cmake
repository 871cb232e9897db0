# Installing and packaging: `cmake --install` lays out the program as a Linux desktop
# application; `cpack -G DEB` (in the build folder) makes kvscope_<version>_<arch>.deb of it.
#   bin/kvscope                                         the program (GUI and CLI)
#   share/applications/io.github.kvscope.KVScope.desktop  the desktop entry
#   share/icons/hicolor/scalable/apps/….svg             its icon
#   share/metainfo/io.github.kvscope.KVScope.metainfo.xml AppStream (software centres)
#   share/man/man1/kvscope.1.gz                          the man page
#   share/kvscope/lessons/*.json                         the lessons (also built into the program)
#   share/kvscope/adapters/lora_{pirate,cowboy,robot}/   the demo LoRA adapters the LoRA lesson loads
# The package's Depends come from dpkg-shlibdeps on the installed binary (Qt 6, QCustomPlot,
# PCRE2, xxHash, libstdc++ … whatever it links), plus what it loads at run time without
# linking: Qt's platform plugins (qt6-qpa-plugins) and a CJK font for Korean (fonts-noto-cjk).
# The CUDA library is left out of the package: it links NVIDIA's runtime, which Debian's
# main archive does not ship (a GPU build is made from source; the program runs on CPU without it).
set(KVSCOPE_APP_ID io.github.kvscope.KVScope)
set(_pkg ${PROJECT_SOURCE_DIR}/resources/packaging)
install(FILES ${_pkg}/${KVSCOPE_APP_ID}.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
install(FILES ${_pkg}/${KVSCOPE_APP_ID}.svg DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
install(FILES ${_pkg}/${KVSCOPE_APP_ID}.metainfo.xml DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)
file(GLOB _lessons CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/resources/lessons/*.json)
install(FILES ${_lessons} DESTINATION ${CMAKE_INSTALL_DATADIR}/kvscope/lessons)
foreach(_adapter lora_pirate lora_cowboy lora_robot)  # app/lesson.h demo_adapter_dir()
  install(FILES ${PROJECT_SOURCE_DIR}/tests/data/${_adapter}/adapter_config.json
                ${PROJECT_SOURCE_DIR}/tests/data/${_adapter}/adapter_model.safetensors
          DESTINATION ${CMAKE_INSTALL_DATADIR}/kvscope/adapters/${_adapter})
endforeach()
# Debian installs man pages gzipped (-n: no name or time stamp, so the package is reproducible).
find_program(KVSCOPE_GZIP gzip)
if(KVSCOPE_GZIP)
  set(_man_gz ${CMAKE_BINARY_DIR}/packaging/kvscope.1.gz)
  add_custom_command(OUTPUT ${_man_gz}
                     COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/packaging
                     COMMAND ${KVSCOPE_GZIP} -9nc ${_pkg}/kvscope.1 > ${_man_gz}
                     DEPENDS ${_pkg}/kvscope.1 VERBATIM)
  add_custom_target(kvscope_man ALL DEPENDS ${_man_gz})
  install(FILES ${_man_gz} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  install(FILES ${_pkg}/kvscope.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kvscope)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "KV Scope")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "chat with local language models and watch the inference engine work")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # kvscope_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "KV Scope developers <kvscope@localhost>")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "chat with local language models and watch the inference engine work
 KV Scope runs small language models (GGUF, safetensors) on the CPU and shows
 live what the inference engine does: the PagedAttention KV block map,
 continuous batching slots, speculative decoding and a quantization lab.
 The kvscope command also runs headless: generate, inspect, bench, eval,
 quantize and an OpenAI-compatible server.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "qt6-qpa-plugins, fonts-noto-cjk")
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/KvscopePackagingDropCuda.cmake)
include(CPack)
