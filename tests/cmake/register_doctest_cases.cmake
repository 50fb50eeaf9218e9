# Run after each test binary is linked (cmake -P): asks the binary for its doctest cases and
# writes a ctest script registering each case as its own test, "<area>: <case name>", so a
# failure names the case and `ctest -R` picks single cases. Written here rather than with
# doctest_discover_tests because case names may contain ';' (a CMake list separator).
#
# Inputs (-D): TEST_BINARY, AREA, OUT_FILE, TEST_ENV (a '|'-separated list), TIMEOUT, SKIP_CODE,
# and EMULATOR ('|'-separated; empty unless cross-building), the command the binary runs under.
string(REPLACE "|" ";" emulator "${EMULATOR}")
set(emulator_args "")
foreach(word IN LISTS emulator)
  string(APPEND emulator_args "[==[${word}]==] ")
endforeach()
execute_process(COMMAND ${emulator} "${TEST_BINARY}" --list-test-cases --no-version=true
                OUTPUT_VARIABLE listing RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${TEST_BINARY} --list-test-cases failed (${rc}):\n${listing}")
endif()
# Keep ';' inside names: swap it for a placeholder before splitting the output into lines.
string(REPLACE ";" "<SEMICOLON>" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
string(REPLACE "|" ";" env "${TEST_ENV}")
set(script "")
set(count 0)
foreach(line IN LISTS lines)
  if(line STREQUAL "" OR line MATCHES "^=+$" OR line MATCHES "^\\[doctest\\]")
    continue()
  endif()
  string(REPLACE "<SEMICOLON>" ";" name "${line}")
  # doctest filters split on ',' and treat '*' and '?' as wildcards; escape the commas.
  string(REPLACE "," "\\," filter "${name}")
  set(test_name "${AREA}: ${name}")
  string(APPEND script
    "add_test([==[${test_name}]==] ${emulator_args}[==[${TEST_BINARY}]==] [==[--test-case=${filter}]==])\n"
    "set_tests_properties([==[${test_name}]==] PROPERTIES LABELS ${AREA} SKIP_RETURN_CODE ${SKIP_CODE}"
    " TIMEOUT ${TIMEOUT} ENVIRONMENT [==[${env}]==])\n")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${TEST_BINARY} lists no test cases")
endif()
file(WRITE "${OUT_FILE}" "${script}")
