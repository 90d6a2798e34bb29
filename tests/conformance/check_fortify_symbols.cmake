# cmake -DNM=... -DBINARY=... [-DSYMBOLS=a;b] -P check_fortify_symbols.cmake
# Fails unless BINARY imports the fortified entry points the program is meant
# to exercise (SYMBOLS; by default those of the fortify program).
execute_process(COMMAND ${NM} -D --undefined-only ${BINARY}
                OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${BINARY}")
endif()
if(NOT SYMBOLS)
  set(SYMBOLS __read_chk __recv_chk __recvfrom_chk __poll_chk __ppoll_chk)
endif()
foreach(sym IN LISTS SYMBOLS)
  if(NOT symbols MATCHES "[ \t]${sym}(@|\n)")
    message(FATAL_ERROR "${BINARY} does not import ${sym}; was it built with -D_FORTIFY_SOURCE=2 -O2?")
  endif()
  message(STATUS "imports ${sym}")
endforeach()
