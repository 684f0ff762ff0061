# Runs the suite under mpirun and passes when the run FAILS (nonzero exit
# status) with output matching EXPECT: the harness self-checks of
# harness_test.cpp.
#   cmake -DMPIEXEC=... -DNUMPROC_FLAG=-n -DNP=2 -DPREFLAGS="..." -DPOSTFLAGS="..."
#         -DEXE=... -DFILTER=... -DEXPECT=<regex> -P expect_failure.cmake
separate_arguments(_pre UNIX_COMMAND "${PREFLAGS}")
separate_arguments(_post UNIX_COMMAND "${POSTFLAGS}")
execute_process(
  COMMAND ${MPIEXEC} ${NUMPROC_FLAG} ${NP} --oversubscribe ${_pre} ${EXE} ${_post}
          --gtest_also_run_disabled_tests --gtest_filter=${FILTER} --gtest_color=no
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 0)
  message(FATAL_ERROR "expected the run to fail (nonzero exit status), got 0")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match \"${EXPECT}\"")
endif()
message("the run failed as expected (exit status ${rc})")
