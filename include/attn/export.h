/* Symbol visibility: the library is built with -fvisibility=hidden and only
 * ATTN_API symbols are exported. */
#ifndef ATTN_EXPORT_H
#define ATTN_EXPORT_H

#if defined(_WIN32)
#define ATTN_API __declspec(dllexport)
#else
#define ATTN_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
#define ATTN_EXTERN_C_BEGIN extern "C" {
#define ATTN_EXTERN_C_END   }
#else
#define ATTN_EXTERN_C_BEGIN
#define ATTN_EXTERN_C_END
#endif

#endif
