# Run by CPack after the install into its staging folder: the CUDA library (when the build has
# one) stays out of the package, see KvscopePackaging.cmake.
file(GLOB_RECURSE _cuda "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*libkvscope_cuda*")
if(_cuda)
  message(STATUS "kvscope package: leaving out ${_cuda}")
  file(REMOVE ${_cuda})
endif()
# …and the lib folder it leaves empty.
file(GLOB_RECURSE _left LIST_DIRECTORIES false "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/usr/lib/*")
if(NOT _left AND IS_DIRECTORY "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/usr/lib")
  file(REMOVE_RECURSE "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/usr/lib")
endif()
