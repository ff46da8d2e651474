# bench_metadata drives whole engine steps: its inputs and the CPU
# stand-ins on simulated machines come from the harness (sim/harness).
if(TARGET bench_metadata)
  target_link_libraries(bench_metadata PRIVATE attn_harness attn_static)
endif()
