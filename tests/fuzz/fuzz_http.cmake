# fuzz_http: the daemon's request handling under libFuzzer (tests/fuzz/fuzz_http.c).
# Included by tests/fuzz/CMakeLists.txt when BF_FUZZ is on, with everything
# built by clang with -fsanitize=fuzzer-no-link,address,undefined; the target
# adds the fuzzer's main. Run:
#   nice build-fuzz/fuzz_http -dict=tests/fuzz/fuzz_http.dict -close_fd_mask=2 \
#       -max_len=65536 -timeout=10 -max_total_time=300 CORPUS_DIR tests/fuzz/corpus/fuzz_http
# (-close_fd_mask=2: the daemon's log lines off, libFuzzer's and ASan's kept)
add_executable(fuzz_http ${CMAKE_CURRENT_LIST_DIR}/fuzz_http.c)
target_link_libraries(fuzz_http PRIVATE bitflipd-lib)
target_compile_definitions(fuzz_http PRIVATE BF_FIXTURES="${PROJECT_SOURCE_DIR}/tests/fixtures")
target_compile_options(fuzz_http PRIVATE -fsanitize=fuzzer)
target_link_options(fuzz_http PRIVATE -fsanitize=fuzzer)
set_target_properties(fuzz_http PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})   # where run.sh looks
# Every seed once, as a test of the fuzz build (seconds).
add_test(NAME fuzz_http_seeds COMMAND fuzz_http -runs=0 -close_fd_mask=2 ${CMAKE_CURRENT_LIST_DIR}/corpus/fuzz_http)
set_tests_properties(fuzz_http_seeds PROPERTIES LABELS fuzz)
# The fuzz build's bitflipd starts its workers and upload checks (ASan's
# memory limit, not RLIMIT_AS: server/work/proc.c); tests/fuzz/bitflipd_workers.sh.
add_test(NAME fuzz_bitflipd_workers COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/bitflipd_workers.sh $<TARGET_FILE:bitflipd>
         ${PROJECT_SOURCE_DIR}/tests/fixtures)
set_tests_properties(fuzz_bitflipd_workers PROPERTIES LABELS fuzz)
