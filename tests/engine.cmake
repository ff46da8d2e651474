# The engine tests drive engines through the harness (sim/harness):
# synthetic inputs, CPU stand-ins on simulated machines, REFERENCE checks.
foreach(t test_engine_basic test_engine_encoder test_engine_kv_skip test_engine_models
          test_engine_reuse test_engine_steps)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE attn_harness attn_static)
  endif()
endforeach()
