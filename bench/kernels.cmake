# bench_attn shares `attn bench`'s code with the CLI and, like it, is built on
# libattn.so's public API (the other benches measure internals: attn_static).
if(TARGET bench_attn)
  target_sources(bench_attn PRIVATE ${PROJECT_SOURCE_DIR}/tools/attn/bench.c
                                    ${PROJECT_SOURCE_DIR}/tools/attn/bench_run.c
                                    ${PROJECT_SOURCE_DIR}/tools/attn/bench_report.c
                                    ${PROJECT_SOURCE_DIR}/tools/attn/cli_util.c)
endif()
