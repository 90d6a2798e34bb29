# cmake -DNM=... -DBINARY=... -P check_fortify_symbols.cmake
# Fails unless BINARY imports the fortified entry points the fortify program
# is meant to exercise through libvsock.
execute_process(COMMAND ${NM} -D --undefined-only ${BINARY}
                OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${BINARY}")
endif()
foreach(sym __read_chk __recv_chk __recvfrom_chk __poll_chk __ppoll_chk)
  if(NOT symbols MATCHES "[ \t]${sym}(@|\n)")
    message(FATAL_ERROR "${BINARY} does not import ${sym}; was it built with -D_FORTIFY_SOURCE=2 -O2?")
  endif()
  message(STATUS "imports ${sym}")
endforeach()
