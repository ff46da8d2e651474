/* The kernel dialect's sources as the build embeds them (generated at build
 * time by cmake/embed_sources.cmake from src/backends/devkern/: one copy of
 * the source, compiled here by the OpenCL driver and by nvcc from the files
 * themselves). In program order: kd_params.h, attn_kdialect.h, the kernels. */
#ifndef ATTN_OPENCL_KD_EMBED_H
#define ATTN_OPENCL_KD_EMBED_H

extern const char *const attn__kd_sources[];
extern const char *const attn__kd_source_names[];
extern const int attn__kd_source_count;

#endif
