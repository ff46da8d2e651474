# bench_attn shares `attn bench`'s code with the CLI.
if(TARGET bench_attn)
  target_sources(bench_attn PRIVATE ${PROJECT_SOURCE_DIR}/tools/attn/bench.c
                                    ${PROJECT_SOURCE_DIR}/tools/attn/cli_util.c)
endif()
