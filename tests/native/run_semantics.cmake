# Runs test_semantics plainly and under the interposer (two emulated devices and a pass-through
# directory) and requires identical logs; then checks that the interposer did see the I/O, that it
# counts I/O on fds above 2000 in a program that raised its fd limit (and counts, as untracked, I/O
# beyond its fd table's reach), and that its trace never writes through a name planted in its folder.
# Inputs: TEST IOTAP SIM SANITIZE CC WORK
file(REMOVE_RECURSE ${WORK})
foreach(run plain tap)
  file(MAKE_DIRECTORY ${WORK}/${run}/a ${WORK}/${run}/b ${WORK}/${run}/out)
endforeach()
file(WRITE ${WORK}/devices.map
  "a\tram\t${WORK}/tap/a\tlatency_us=20 interface_mb_s=2000\n"
  "b\tssd\t${WORK}/tap/b\tread_latency_us=15 write_latency_us=5 channels=2 flush_ms=0.05\n")

set(PRELOAD ${IOTAP})
if(SANITIZE)
  execute_process(COMMAND ${CC} -print-file-name=libasan.so OUTPUT_VARIABLE ASAN OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(PRELOAD "${ASAN}:${IOTAP}")
endif()

# The same devices with a small emulated page cache (64 pages: eviction and writeback run often).
file(READ ${WORK}/devices.map map)
file(WRITE ${WORK}/devices-pc.map "${map}@pagecache\tbytes=262144 readahead_kb=32 dirty_background_pct=10\n")
foreach(kind "" "-pc")
  execute_process(COMMAND ${TEST} mkstate ${SIM} ${WORK}/devices${kind}.map ${WORK}/state${kind} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "could not create the state${kind}")
  endif()
endforeach()
# Seeds 1 and 2 run direct to the device models; seed 3 through the page cache.
foreach(seed 1 2 3)
  set(state ${WORK}/state)
  if(seed EQUAL 3)
    set(state ${WORK}/state-pc)
  endif()
  file(REMOVE_RECURSE ${WORK}/plain/a ${WORK}/plain/b ${WORK}/plain/out ${WORK}/tap/a ${WORK}/tap/b ${WORK}/tap/out)
  foreach(run plain tap)
    file(MAKE_DIRECTORY ${WORK}/${run}/a ${WORK}/${run}/b ${WORK}/${run}/out)
  endforeach()
  execute_process(COMMAND ${TEST} run ${seed} ${WORK}/plain ${WORK}/plain.log RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "plain run failed (${rc})")
  endif()
  # a fresh trace folder per run, as the launcher gives: trace files are created new, never reused
  file(MAKE_DIRECTORY ${WORK}/trace${seed})
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=${PRELOAD} DBTIER_IOTAP=${state}
                          DBTIER_IOTAP_TRACE=${WORK}/trace${seed} ASAN_OPTIONS=detect_leaks=0
                          ${TEST} run ${seed} ${WORK}/tap ${WORK}/tap.log RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "run under the interposer failed (${rc})")
  endif()
  file(SHA256 ${WORK}/plain.log plain_sum)
  file(SHA256 ${WORK}/tap.log tap_sum)
  if(NOT plain_sum STREQUAL tap_sum)
    execute_process(COMMAND diff ${WORK}/plain.log ${WORK}/tap.log OUTPUT_VARIABLE d)
    string(SUBSTRING "${d}" 0 3000 d)
    message(FATAL_ERROR "seed ${seed}: results differ under the interposer:\n${d}")
  endif()
  file(STRINGS ${WORK}/tap.log lines)
  list(LENGTH lines n)
  message(STATUS "seed ${seed}: ${n} logged results identical with and without the interposer (${state})")
endforeach()
execute_process(COMMAND ${TEST} check ${SIM} ${WORK}/state RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the interposer did not count reads, writes and flushes on both devices")
endif()
set(no_bypasses bypass.mmap=0 bypass.libaio=0 bypass.posix_aio=0 bypass.io_uring=0 bypass.splice=0
    bypass.sendfile=0 bypass.exec_env=0 bypass.exec_static=0 bypass.exec_foreign=0)
foreach(state state state-pc)
  execute_process(COMMAND ${TEST} counts ${SIM} ${WORK}/${state} untracked_calls=0 trace_failures=0 ${no_bypasses}
                  RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "${state}: the runs left untracked calls or trace failures")
  endif()
endforeach()
file(GLOB traces ${WORK}/trace*/iotap-*.trc)
list(LENGTH traces ntraces)
if(ntraces LESS 6)
  message(FATAL_ERROR "expected trace files from every process, found ${ntraces}")
endif()
foreach(seed 1 2 3)
  execute_process(COMMAND ${TEST} tracefiles ${WORK}/trace${seed} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "trace files of seed ${seed} are not private regular files")
  endif()
endforeach()

# fds above 2000 after the program raised RLIMIT_NOFILE from 1024: counted (tracked); and beyond the
# fd table's reach (lowered to 2000 for the test), counted as untracked calls with one warning.
# The trace folder has symlinks planted at the names the first files would get: the trace must stop
# (counted in the state) and the symlinks' target stay untouched.
set(highfd_calls 63) # 31 reads, 31 writes, 1 fsync
foreach(case tracked untracked)
  file(REMOVE_RECURSE ${WORK}/tap/a ${WORK}/trace-${case})
  file(MAKE_DIRECTORY ${WORK}/tap/a ${WORK}/trace-${case})
  execute_process(COMMAND ${TEST} mkstate ${SIM} ${WORK}/devices.map ${WORK}/state-${case} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "could not create state-${case}")
  endif()
  set(reach "")
  if(case STREQUAL untracked)
    set(reach DBTIER_IOTAP_FD_REACH=2000)
  endif()
  file(WRITE ${WORK}/victim "precious\n")
  # process 0 execs itself as process 1, which does the I/O
  foreach(proc 0 1)
    file(CREATE_LINK ${WORK}/victim ${WORK}/trace-${case}/iotap-${proc}-0.trc SYMBOLIC)
  endforeach()
  execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=${PRELOAD} DBTIER_IOTAP=${WORK}/state-${case} ${reach}
                          DBTIER_IOTAP_TRACE=${WORK}/trace-${case} ASAN_OPTIONS=detect_leaks=0
                          ${TEST} highfd ${WORK}/tap
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message(STATUS "highfd ${case}: ${out}${err}")
  if(rc EQUAL 77)
    message(STATUS "highfd ${case}: skipped, the fd limit cannot be raised here")
    continue()
  elseif(rc)
    message(FATAL_ERROR "highfd ${case} failed (${rc})")
  endif()
  string(REGEX MATCHALL "beyond what the interposer can track" warnings "${err}")
  list(LENGTH warnings nwarnings)
  if(case STREQUAL tracked)
    # process 0 execs process 1 with its environment as it is: no bypass
    set(expect dev0.reads=31 dev0.writes=31 dev0.flushes=1 untracked_calls=0 trace_failures=1 bypass.exec_env=0)
    set(expect_warnings 0)
  else()
    set(expect dev0.reads=0 dev0.writes=0 dev0.flushes=0 untracked_calls=${highfd_calls})
    set(expect_warnings 1)
  endif()
  if(NOT nwarnings EQUAL expect_warnings)
    message(FATAL_ERROR "highfd ${case}: ${nwarnings} warnings about untracked fds, expected ${expect_warnings}")
  endif()
  execute_process(COMMAND ${TEST} counts ${SIM} ${WORK}/state-${case} ${expect} RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "highfd ${case}: the interposer's counts are not the program's calls")
  endif()
  file(READ ${WORK}/victim victim)
  if(NOT victim STREQUAL "precious\n")
    message(FATAL_ERROR "highfd ${case}: the trace wrote through a planted symlink")
  endif()
endforeach()
# Calls the interposer passes through but counts as bypasses (maps, splice, sendfile, AIO, io_uring,
# programs started): the same results plainly and interposed, and each kind counted as often as it
# happened on a device file (test_semantics.c, bypass).
foreach(run plain tap)
  file(REMOVE_RECURSE ${WORK}/${run}/a ${WORK}/${run}/out)
  file(MAKE_DIRECTORY ${WORK}/${run}/a ${WORK}/${run}/out)
endforeach()
execute_process(COMMAND ${TEST} mkstate ${SIM} ${WORK}/devices.map ${WORK}/state-bypass RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "could not create state-bypass")
endif()
execute_process(COMMAND ${TEST} bypass ${WORK}/plain ${WORK}/bypass-plain.log RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "bypass: plain run failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env LD_PRELOAD=${PRELOAD} DBTIER_IOTAP=${WORK}/state-bypass
                        ASAN_OPTIONS=detect_leaks=0 ${TEST} bypass ${WORK}/tap ${WORK}/bypass-tap.log
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "bypass: run under the interposer failed (${rc})")
endif()
file(SHA256 ${WORK}/bypass-plain.log plain_sum)
file(SHA256 ${WORK}/bypass-tap.log tap_sum)
if(NOT plain_sum STREQUAL tap_sum)
  execute_process(COMMAND diff ${WORK}/bypass-plain.log ${WORK}/bypass-tap.log OUTPUT_VARIABLE d)
  message(FATAL_ERROR "bypass: results differ under the interposer:\n${d}")
endif()
file(STRINGS ${WORK}/bypass-tap.log lines)
list(LENGTH lines n)
message(STATUS "bypass: ${n} logged results identical with and without the interposer")
file(STRINGS ${WORK}/bypass-tap.log ring REGEX "io_uring_setup ok")
set(uring 0)
if(ring)
  set(uring 1) # where the kernel allows io_uring: its setup is counted
endif()
execute_process(COMMAND ${TEST} counts ${SIM} ${WORK}/state-bypass bypass.mmap=3 bypass.splice=1 bypass.sendfile=1
                        bypass.libaio=1 bypass.posix_aio=1 bypass.io_uring=${uring} bypass.exec_env=2
                        bypass.exec_static=0 bypass.exec_foreign=0 untracked_calls=0
                RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "bypass counts:\n${out}")
if(rc)
  message(FATAL_ERROR "bypass: the interposer's counts are not the calls made on device files")
endif()
message(STATUS "1 passed, 0 failed")
